"""Encryption at rest covers every user-written field of every toolset (issue 18 §5): a unique
marker written into each is absent from the database file, its write-ahead log, a backup and
the proposals folder, while lookups by those fields (project name, tag, category, decision
target, proposals through `accept_proposal` and `memhub proposal show`) keep working."""

from __future__ import annotations

import base64
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from memhub.cli.container import Container, build_container
from memhub.core.models import Principal, Viewer
from memhub.services.decisions import proposals, reflect
from memhub.store.rows import ItemQuery
from memhub.store.sqlite.database import SqliteStore
from tests.conftest import make_settings
from tests.helpers import MEMHUB, ok
from tests.store.backends import Backend, sqlite_only

pytestmark = pytest.mark.anyio
SECRET = "s3cret-for-tests"
AT = "2026-11-24T10:00:00Z"

# one marker per field: a failure names the field that leaked
FIELDS = (
    "memory_content", "memory_metadata", "memory_metadata_key", "memory_tag", "memory_category",
    "assoc_project", "assoc_project_description", "session_name",
    "disc_project", "disc_project_description", "topic_title", "topic_description", "log_content",
    "disc_decision", "decision_title", "decision_target", "decision_rationale",
    "decision_consequence", "claim_text", "claim_actor", "claim_note", "claim_url", "claim_commit",
    "entity_name", "entity_key", "entity_attr", "relation_type", "vault_text",
)  # fmt: skip
MARK = {field: f"zq{n:02d}{field.replace('_', '')}x" for n, field in enumerate(FIELDS)}


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def _leaks(data: bytes) -> list[str]:
    return [field for field, marker in MARK.items() if marker.encode() in data]


async def _write_everything(client: Client, container: Container) -> dict[str, str]:
    found: dict[str, str] = {}
    stored = await ok(
        client,
        "memory",
        action="store",
        content=f"remember {MARK['memory_content']} for later",
        domain="user",
        tags=[MARK["memory_tag"]],
        category=MARK["memory_category"],
        metadata={MARK["memory_metadata_key"]: MARK["memory_metadata"]},
    )
    found["memory"] = stored["memory"]["id"]
    await ok(
        client,
        "project",
        action="create",
        name=MARK["assoc_project"],
        description=MARK["assoc_project_description"],
    )
    await ok(client, "user", action="create_session", session_name=MARK["session_name"])
    pid = (
        await ok(
            client, "add-project", name=MARK["disc_project"], description=MARK["disc_project_description"]
        )
    )["project_id"]
    topic = (
        await ok(
            client,
            "add-topic",
            project_id=pid,
            title=MARK["topic_title"],
            description=MARK["topic_description"],
        )
    )["topic_id"]
    await ok(client, "add-log", topic_id=topic, content=f"we said {MARK['log_content']}")
    await ok(
        client, "add-decision", topic_id=topic, decision=f"decided {MARK['disc_decision']}", reason="best"
    )
    for title in (f"use {MARK['decision_title']}", "use something else entirely"):
        await ok(
            client,
            "record_decision",
            title=title,
            target=MARK["decision_target"],
            rationale=f"because {MARK['decision_rationale']} matters",
            consequences=[f"then {MARK['decision_consequence']}"],
        )
    await ok(
        client,
        "pce.memory.upsert",
        text=f"the claim {MARK['claim_text']} holds",
        provenance={
            "at": AT,
            "actor": MARK["claim_actor"],
            "note": MARK["claim_note"],
            "url": f"https://example.com/{MARK['claim_url']}",
            "git": {"commit": "abc1234", "repo": MARK["claim_commit"]},
        },
        entities=[
            {
                "id": "e1",
                "type": "Concept",
                "name": MARK["entity_name"],
                "canonical_key": MARK["entity_key"],
                "attrs": {"k": MARK["entity_attr"]},
            },
            {"id": "e2", "type": "Concept", "name": "other"},
        ],
        relations=[{"id": "r1", "src_id": "e1", "dst_id": "e2", "type": MARK["relation_type"]}],
    )
    await ok(
        client, "vault_create", path="notes/plain.md", content=f"# Heading\n\nthe {MARK['vault_text']}\n"
    )
    return found


@sqlite_only("encryption")
async def test_no_user_text_in_clear_in_the_file_wal_backup_or_proposals(
    tmp_path: Path, backend: Backend
) -> None:
    key = _key()
    settings = make_settings(
        tmp_path, backend, encryption_key=key, agent_memory_secret=SECRET, review_window_s=0
    )
    container = build_container(settings)
    try:
        async with Client(container.server) as client:
            ids = await _write_everything(client, container)
            call = container.call(
                "decisions", Principal("alice", via="cli", default_project="demo"), "cli.reflect"
            )
            (proposal,) = await reflect.reflect(call)
            store = container.runtime.store
            assert isinstance(store, SqliteStore)
            backup = tmp_path / "backup.db"
            store.backup_to(backup)
            wal = Path(store.location + "-wal")
            assert wal.stat().st_size > 0
            raw = {
                "database": Path(store.location).read_bytes(),
                "wal": wal.read_bytes(),
                "backup": backup.read_bytes(),
                "proposals": b"".join(p.read_bytes() for p in settings.proposals_dir.iterdir()),
            }
            for where, data in raw.items():
                assert _leaks(data) == [], where
            assert MARK["decision_target"] not in proposal.name

            # ... and everything is still found by what it was written with
            got = await ok(client, "memory", action="get", memory_id=ids["memory"])
            assert got["memory"]["metadata"] == {MARK["memory_metadata_key"]: MARK["memory_metadata"]}
            assert got["memory"]["tags"] == [MARK["memory_tag"]]
            by_tag = await ok(client, "search", type="tags", tags=[MARK["memory_tag"]])
            assert [m["id"] for m in by_tag["memories"]] == [ids["memory"]]
            projects = await ok(client, "get-projects")
            assert MARK["disc_project"] in [p["name"] for p in projects["projects"]]
            shown = proposals.load(settings.proposals_dir, proposal.name, proposals.cipher_of(call))
            assert shown.meta["target"] == MARK["decision_target"]
            accepted = await ok(client, "accept_proposal", proposal_id=proposal.name, secret=SECRET)
            assert accepted["status"] == "success"
            assert MARK["decision_target"].encode() not in proposal.read_bytes()
    finally:
        container.close()

    cli = subprocess.run(
        [MEMHUB, "--home", str(tmp_path), "--user", "alice", "proposal", "show", proposal.name],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MEMHUB_EMBEDDER": "none", "MEMHUB_ENCRYPTION_KEY": key},
    )
    assert cli.returncode == 0, cli.stderr
    assert f'target: "{MARK["decision_target"]}"' in cli.stdout and 'status: "accepted"' in cli.stdout
    closed = b"".join(p.read_bytes() for p in tmp_path.glob("memhub.db*") if p.is_file())
    assert _leaks(closed) == []


@sqlite_only("encryption")
def test_a_store_encrypted_by_an_older_memhub_is_sealed_at_start(tmp_path: Path) -> None:
    """Older stores encrypted titles and bodies only: their attributes, tags and names are
    sealed when a server opens them, and lookups by name and tag still find them."""
    key = base64.b64decode(_key())
    path = tmp_path / "memhub.db"
    store = SqliteStore(path, keys=[key])
    with store.transaction(write=True) as tx:
        project = tx.insert_project("demo", None, {}, "alice")
    store.close()
    old = sqlite3.connect(path)  # what an older memhub left: names, tags and attributes in clear
    with old:
        old.execute("UPDATE projects SET name = ?, attrs = '{}'", (MARK["disc_project"],))
        old.execute(
            "INSERT INTO items(kind, owner, scope, project_id, body, tags, attrs, created_at, updated_at)"
            " VALUES ('memory', 'alice', 'project', ?, '', ?, ?, 'now', 'now')",
            (project.id, f'["{MARK["memory_tag"]}"]', f'{{"note": "{MARK["memory_metadata"]}"}}'),
        )
        old.execute("INSERT INTO item_tags(tag, item_id) VALUES (?, 1)", (MARK["memory_tag"],))
    old.close()
    legacy = tmp_path / "legacy-backup.db"
    shutil.copyfile(path, legacy)
    store = SqliteStore(path, keys=[key])
    try:
        with store.transaction(write=False) as tx:
            found = tx.get_project_by_name(MARK["disc_project"])
            assert found is not None and found.id == project.id
            viewer = Viewer("alice", "2030-01-01T00:00:00Z")
            (item,) = tx.query_items(viewer, ItemQuery(tags_any=[MARK["memory_tag"]]))
            assert item.attrs == {"note": MARK["memory_metadata"]}
        with store.transaction(write=True) as tx:
            tx.append_event("alice", "test", "ok", {})  # a write moves the WAL on
    finally:
        store.close()
    assert _leaks(b"".join(p.read_bytes() for p in tmp_path.glob("memhub.db*"))) == []

    restored = SqliteStore(tmp_path / "other" / "memhub.db", keys=[key])  # a backup of that age
    try:
        assert restored.verify_backup(legacy) == []
        restored.restore_from(legacy)
        with restored.transaction(write=False) as tx:
            assert tx.get_project_by_name(MARK["disc_project"]) is not None
    finally:
        restored.close()
