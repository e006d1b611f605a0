"""`memhub migrate --from SQLITE --to postgresql://…`: a store made by this release, through its
real tools (every toolset), moved to PostgreSQL, then used there: the same searches, its API
keys, its audit chain, ids that continue. All or nothing; encrypted sources decrypted.

The source is a SQLite file and the target the embedded PostgreSQL (tests/cli/conftest.py)
whatever the backend under test."""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memhub.cli.container import build_container
from memhub.core.settings import Settings
from memhub.store.crypto import new_key
from tests.auth.test_api_keys import _as
from tests.helpers import MEMHUB, error, http_server, ok
from tests.pair import backfill_running, settled
from tests.services.pce.conftest import PROV
from tests.store.backends import BACKENDS, Backend

pytestmark = pytest.mark.anyio

SQLITE = BACKENDS["sqlite"]
COPIED = ("principals", "projects", "project_members", "sessions", "items", "item_tags", "links",
          "vectors", "events", "pce_policies", "pce_feedback", "pce_active_contexts")  # fmt: skip
POLICY = """version: '0.4'
scopes: {session: {ttl: '1d', max_tokens: 5000}}
boundary_classes: {public: {allow: ['*']}, internal: {allow: ['answer:task']}}
"""
QUERIES = ("SQLite WAL", "cancel subscription", "設計方針", "rollback")


def memhub(home: Path, db: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {"MEMHUB_EMBEDDER": "none", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", **env}
    if "PYTHONPATH" in os.environ:
        environ["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(
        [MEMHUB, "--home", str(home), "--db", db, "--user", "alice", "--project", "demo", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )


def done(home: Path, db: str, *args: str, **env: str) -> str:
    finished = memhub(home, db, *args, **env)
    assert finished.returncode == 0, finished.stderr
    return finished.stdout


def counts(backend: Backend, url: str) -> dict[str, int]:
    return {t: backend.rows(url, f"SELECT count(*) FROM {t}")[0][0] for t in COPIED}


async def build_source(home: Path, key: str = "") -> tuple[str, str]:
    """A store written by every toolset (vectors from the tests' hash embedder), a person's CLI
    commands (API key, signed policy, decisions and a proposal), one memory deleted."""
    db = SQLITE.url(home)
    env = {"MEMHUB_ENCRYPTION_KEY": key} if key else {}
    alice = done(home, db, "apikey", "create", "alice", **env).strip()  # the first: the admin
    done(home, db, "apikey", "create", "bob", **env)
    extra: dict[str, Any] = {"encryption_key": key} if key else {}
    settings = Settings(home=home, user="alice", project="demo", db=db, embedder="hash", **extra)
    container = build_container(settings)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(container.run_background)
        await backfill_running(container)
        async with Client(container.server) as client:
            project = await ok(client, "project", action="create", name="shared", description="team")
            await ok(client, "project", action="add_member", project_id=project["project"]["id"],
                     user_id="bob", role="editor")  # fmt: skip
            for text, domain in (("We chose SQLite WAL for the local store", "user"),
                                 ("設計方針: rollback plans are written first", "project"),
                                 ("A blue-green rollback takes ten minutes", "global"),
                                 ("to be deleted", "user")):  # fmt: skip
                where = {"project_id": project["project"]["id"]} if domain == "project" else {}
                stored = await ok(
                    client, "memory", action="store", content=text, domain=domain, tags=["ops"], **where
                )
            await ok(client, "memory", action="delete", memory_id=stored["memory"]["id"])
            await ok(client, "user", action="create_session", session_name="s1")
            await ok(client, "memory", action="store", content="session note on SQLite WAL", domain="session")
            topic = await ok(client, "add-topic", project_id=(await ok(client, "add-project", name="disc"))[
                "project_id"], title="Cancel subscription API")  # fmt: skip
            await ok(client, "add-log", topic_id=topic["topic_id"], content="AI: cancel is async")
            await ok(client, "add-decision", topic_id=topic["topic_id"], decision="cancel is async",
                     reason="the payment provider is slow")  # fmt: skip
            claim = await ok(client, "pce.memory.upsert", text="POST /subscriptions/{id}/cancel は非同期",
                             provenance=PROV, scope="project")  # fmt: skip
            await ok(client, "pce.memory.activate", q="cancel subscription", scope=["project"],
                     allow=["answer:task"], top_k=5)  # fmt: skip
            await ok(client, "pce.memory.feedback", claim_id=claim["data"]["id"], signal="helpful")
            await ok(
                client, "vault_create", path="notes/wal.md", content="# WAL\nSQLite WAL keeps readers going\n"
            )
        await settled(container)
        tasks.cancel_scope.cancel()
    container.close()
    policy = home / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    signature = done(home, db, "policy", "sign", str(policy), "--approver", "carol",
                     MEMHUB_PCE_POLICY_HMAC_KEY="k3y", **env).strip()  # fmt: skip
    done(home, db, "policy", "apply", str(policy), "--approver", "carol", "--signature", signature,
         MEMHUB_PCE_POLICY_HMAC_KEY="k3y", **env)  # fmt: skip
    for title, target in (("Use MySQL", "database_policy"), ("Use PostgreSQL", "Database-Policy")):
        why = "the reasons for it"
        done(home, db, "decision", "add", "--title", title, "--target", target, "--rationale", why, **env)
    assert len(done(home, db, "reflect", **env).split()) == 1  # one proposal file
    return db, alice


async def searches(client: Client) -> list[list[str]]:
    found = []
    for query in QUERIES:
        out = await ok(client, "search", type="semantic", query=query, threshold=0.0, limit=20)
        found.append([m["id"] for m in out["memories"]])
    return found


async def test_a_store_moves_to_postgresql_and_keeps_working(tmp_path: Path, postgres: Backend) -> None:
    home = tmp_path / "home"
    source, key = await build_source(home)
    target = postgres.url(tmp_path, "target")
    before = counts(SQLITE, source)
    assert all(before[t] for t in COPIED), before  # every table holds rows: each is exercised

    moved = memhub(home, source, "migrate", "--to", target)
    assert moved.returncode == 0, moved.stderr
    assert "verified: row counts equal, audit chain ok" in moved.stdout and "migrate" in moved.stderr
    assert counts(postgres, target) == {**before, "events": before["events"] + 1}  # + the migration's
    assert postgres.rows(target, "SELECT count(*) FROM items_fts")[0][0] == before["items"]
    assert postgres.rows(target, "SELECT count(*) FROM vectors WHERE embedding IS NOT NULL")[0][0] == before[
        "vectors"]  # fmt: skip
    events = SQLITE.rows(
        source, "SELECT id, at, principal, tool, outcome, detail, prev_hash, hash FROM events"
    )
    assert postgres.rows(target, "SELECT id, at, principal, tool, outcome, detail, prev_hash, hash"
                         " FROM events ORDER BY id")[: len(events)] == events  # fmt: skip
    assert postgres.rows(target, "SELECT tool FROM events ORDER BY id DESC LIMIT 1") == [("cli.migrate",)]
    # the planner's statistics come with the copy, not at autovacuum's next pass (a minute on)
    analyzed = postgres.rows(
        target, "SELECT DISTINCT tablename FROM pg_stats WHERE schemaname = current_schema()"
    )
    assert {"items", "items_fts", "vectors", "links", "events"} <= {name for (name,) in analyzed}

    doctor = memhub(home, target, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert (
        f"audit chain: {before['events'] + 1} events, ok" in doctor.stdout
        and f"items {before['items']}," in doctor.stdout
    )

    # the same searches: the source in-process, the target behind a real HTTP server with API keys
    settings = Settings(home=home, user="alice", project="demo", db=source, embedder="none")
    container = build_container(settings)
    async with Client(container.server) as client:
        expected = await searches(client)
    container.close()
    assert any(expected)
    with http_server(target, "--auth", "apikey") as base:
        async with _as(base, key) as client:
            assert await searches(client) == expected
            # ids continue past every id the source handed out, the deleted memory's too
            top = SQLITE.rows(source, "SELECT seq FROM sqlite_sequence WHERE name = 'items'")[0][0]
            new = await ok(client, "memory", action="store", content="written on PostgreSQL", domain="user")
            assert int(new["memory"]["id"].removeprefix("mem_")) > top
        request = urllib.request.Request(f"{base}/mcp", data=b"{}", headers={"X-API-Key": "mh_wrong"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=5)
        assert refused.value.code == 401

    # the person's commands on the target: decisions, the proposal (home folder), the policy
    assert "Use PostgreSQL" in done(home, target, "decision", "list")
    assert "\topen\t" in done(home, target, "proposal", "list")
    assert '"version": "0.4.0"' in done(home, target, "policy", "show")


async def test_all_or_nothing(tmp_path: Path, postgres: Backend) -> None:
    home = tmp_path / "home"
    source, _ = await build_source(home)
    target = postgres.url(tmp_path, "target")
    # a row the source let in (its raw connection does not check foreign keys) and PostgreSQL
    # refuses, copied after every other table: the failure comes late in the copy
    SQLITE.execute(source, "INSERT INTO pce_feedback VALUES (999999, 'alice', 1, 'helpful', NULL, 'x')")
    failed = memhub(home, source, "migrate", "--to", target)
    assert failed.returncode == 1
    assert failed.stderr.strip().endswith(
        "copying pce_feedback failed (ForeignKeyViolation on pce_feedback_claim_id_fkey); nothing was written"
    )
    assert "Traceback" not in failed.stderr
    assert set(counts(postgres, target).values()) == {0}
    assert postgres.rows(target, "SELECT count(*) FROM items_fts")[0][0] == 0

    SQLITE.execute(source, "DELETE FROM pce_feedback WHERE claim_id = 999999")
    assert memhub(home, source, "migrate", "--to", target).returncode == 0
    first = counts(postgres, target)
    again = memhub(home, source, "migrate", "--to", target)  # a target holding data: refused
    assert again.returncode == 2 and "the target database is not empty" in again.stderr
    assert counts(postgres, target) == first
    SQLITE.execute(source, "INSERT INTO pce_feedback VALUES (999999, 'alice', 1, 'helpful', NULL, 'x')")
    replaced = memhub(home, source, "migrate", "--to", target, "--replace")  # emptied, then fails
    assert replaced.returncode == 1 and counts(postgres, target) == first  # still the first copy
    SQLITE.execute(source, "DELETE FROM pce_feedback WHERE claim_id = 999999")
    elsewhere = memhub(home, str(tmp_path / "unused.db"), "migrate", "--from", f"sqlite:///{source}",
                       "--to", target, "--replace")  # fmt: skip
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert counts(postgres, target) == first and not (tmp_path / "unused.db").exists()


async def test_an_encrypted_store_is_decrypted_while_copied(tmp_path: Path, postgres: Backend) -> None:
    home, key = tmp_path / "home", new_key()
    source, _ = await build_source(home, key)
    sealed = next((home / "proposals").glob("*.md"))
    assert sealed.read_text(encoding="utf-8").startswith("mhenc1:")
    target = postgres.url(tmp_path, "target")
    refused = memhub(home, source, "migrate", "--to", target)  # without the key
    assert refused.returncode == 2 and "this store is encrypted: set MEMHUB_ENCRYPTION_KEY" in refused.stderr
    assert set(counts(postgres, target).values()) == {0}

    moved = memhub(home, source, "migrate", "--to", target, MEMHUB_ENCRYPTION_KEY=key)
    assert moved.returncode == 0, moved.stderr
    assert "1 sealed proposal files rewritten in clear" in moved.stdout
    assert key not in moved.stdout + moved.stderr
    bodies = [r[0] for r in postgres.rows(target, "SELECT body FROM items WHERE kind = 'memory'")]
    assert "We chose SQLite WAL for the local store" in bodies
    names = [r[0] for r in postgres.rows(target, "SELECT name FROM projects ORDER BY id")]
    assert "shared" in names and not any(n.startswith("mhenc1:") for n in names)
    assert not sealed.read_text(encoding="utf-8").startswith("mhenc1:")
    assert "Database-Policy" in done(home, target, "proposal", "show", sealed.name)
    settings = Settings(home=home, user="alice", project="demo", db=target, embedder="none")
    container = build_container(settings)
    async with Client(container.server) as client:
        found = await ok(client, "search", type="semantic", query="SQLite WAL", threshold=0.0)
        assert "We chose SQLite WAL for the local store" in [m["content"] for m in found["memories"]]
        assert (await error(client, "memory", {"action": "get", "memory_id": "mem_999"}))["code"]
    container.close()


def test_refusals_are_one_line(tmp_path: Path, postgres: Backend) -> None:
    home = tmp_path / "home"
    home.mkdir()
    missing = memhub(home, str(home / "none.db"), "migrate", "--to", postgres.url(tmp_path, "t"))
    assert missing.returncode == 2 and missing.stderr.startswith("memhub: migrate: no SQLite store at")
    assert not (home / "none.db").exists()
    done(home, SQLITE.url(home), "apikey", "list")  # makes the store
    to_sqlite = memhub(home, SQLITE.url(home), "migrate", "--to", str(tmp_path / "other.db"))
    assert to_sqlite.returncode == 2 and "--to must be a PostgreSQL URL" in to_sqlite.stderr
    unreachable = "postgresql://alice:s3cr3t-pw@127.0.0.1:9/memhub?connect_timeout=1"
    down = memhub(home, SQLITE.url(home), "migrate", "--to", unreachable)
    assert down.returncode == 1 and "cannot connect to the PostgreSQL database" in down.stderr
    assert "s3cr3t-pw" not in down.stdout + down.stderr and "Traceback" not in down.stderr
