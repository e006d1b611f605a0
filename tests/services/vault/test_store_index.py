"""One store: note sections become items the shared search finds; edits outside memhub follow;
the vault is its owner's; every call is audited with seed §6 fields and never note text."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memhub.auth.identity import Identity
from memhub.cli.container import build_container
from memhub.core.models import Principal, Viewer
from memhub.mcp.server import build_mcp_server
from memhub.services.vault.state import VaultState
from memhub.store.base import EventRow, ItemQuery
from tests.conftest import make_settings
from tests.helpers import error, ok
from tests.services.vault.conftest import DESIGN, VaultEnv, sample_vault
from tests.store.backends import Backend, rows

pytestmark = pytest.mark.anyio
OPS = "projects/memhub/運用メモ.md"


def _notes(env: VaultEnv, principal: str = "alice") -> list[Any]:
    store = env.container.runtime.store
    with store.transaction(write=False) as tx:
        return tx.query_items(Viewer(principal, tx.now), ItemQuery(kinds=("note",), limit=10_000))


async def _search(env: VaultEnv, query: str, principal: str = "alice") -> list[dict[str, Any]]:
    runtime = env.container.runtime
    assert runtime.search is not None
    with runtime.store.transaction(write=False) as tx:
        viewer = Viewer(principal, tx.now)
    hits = await runtime.search.search(viewer, query, kinds=("note",), k_final=5)
    with runtime.store.transaction(write=False) as tx:
        return [tx.get_item(viewer, hit.item_id).attrs for hit in hits]  # type: ignore[union-attr]


def _fast_sync(env: VaultEnv) -> None:
    state = env.container.states["vault"]
    assert isinstance(state, VaultState)
    state.interval_s = 0.0  # walk the vault on every call (default: at most every 2 s)


async def test_sections_are_items_with_a_way_back(env: VaultEnv) -> None:
    await env.ok("vault_ls")
    items = _notes(env)
    paths = {item.attrs["path"] for item in items}
    assert DESIGN in paths and "日記/りんごの保存.md" in paths and "README.md" in paths
    storage = next(i for i in items if i.attrs["path"] == DESIGN and i.attrs["lines"] == [11, 16])
    assert storage.title == "設計方針 › ストレージ" and "BEGIN IMMEDIATE" in storage.body
    assert storage.scope == "user" and storage.owner == "alice" and "vault" in storage.tags
    hits = await _search(env, "バックアップ 保持")
    assert hits[0]["path"] == OPS and hits[0]["lines"] == [6, 10]
    assert await _search(env, "バックアップ", principal="bob") == []  # user scope: the owner's


async def test_edits_outside_memhub_reach_the_store(env: VaultEnv) -> None:
    _fast_sync(env)
    await env.ok("vault_ls")
    before = len(_notes(env))
    (env.root / "日記/新しいメモ.md").write_text("# 量子\n\n量子もつれについて\n", encoding="utf-8")
    (env.root / "README.md").unlink()
    ops = env.root / OPS
    ops.write_text(ops.read_text(encoding="utf-8").replace("14 日間", "30 日間"), encoding="utf-8")
    await env.ok("vault_ls")
    items = _notes(env)
    paths = {item.attrs["path"] for item in items}
    assert "日記/新しいメモ.md" in paths and "README.md" not in paths
    assert len(items) == before + 1 - 1
    backup = next(i for i in items if i.attrs["path"] == OPS and i.attrs["lines"] == [6, 10])
    assert "30 日間" in backup.body
    assert (await _search(env, "量子もつれ"))[0]["path"] == "日記/新しいメモ.md"


async def test_notes_deleted_while_memhub_was_stopped_leave_the_store(
    tmp_path: Path, backend: Backend
) -> None:
    root = sample_vault(tmp_path)
    settings = make_settings(tmp_path, backend, vault=root, toolsets=("vault",))
    for step in range(2):
        container = build_container(settings)
        async with Client(container.server) as client:
            await ok(client, "vault_ls")
            env = VaultEnv(root, container, client)
            paths = {item.attrs["path"] for item in _notes(env)}
        container.close()
        if step == 0:
            assert "README.md" in paths
            (root / "README.md").unlink()
    assert "README.md" not in paths and DESIGN in paths


async def test_memhub_writes_are_indexed_at_once(env: VaultEnv) -> None:
    await env.ok("vault_ls")  # the scan interval now runs: only forced paths are re-read
    await env.ok("vault_create", path="inbox/決定.md", content="# 決定\n\nキャッシュは Redis をやめる\n")
    assert (await _search(env, "Redis"))[0]["path"] == "inbox/決定.md"
    await env.ok("vault_replace", path="inbox/決定.md", find="Redis", replace="Memcached")
    assert (await _search(env, "Memcached"))[0]["path"] == "inbox/決定.md"
    assert await _search(env, "Redis") == []


async def test_only_the_vault_owner_may_use_it(env: VaultEnv) -> None:
    runtime = env.container.runtime
    bob_server = build_mcp_server(
        runtime, ["vault"], Identity(Principal(id="bob"), require_key=False), states=env.container.states
    )
    async with Client(bob_server) as bob:
        for tool, arguments in [
            ("vault_ls", {}),
            ("vault_read", {"path": DESIGN, "full": True}),
            ("vault_create", {"path": "bob.md", "content": "x"}),
        ]:
            assert (await error(bob, tool, arguments))["code"] == "forbidden"
    assert not (env.root / "bob.md").exists()


async def test_calls_are_audited_without_note_text(env: VaultEnv) -> None:
    secret = "合言葉は swordfish-7731"
    await env.ok("vault_create", path="inbox/secret.md", content=secret + "\n")
    await env.ok("vault_write", path="inbox/secret.md", content=secret, mode="append")
    await env.ok("vault_replace", path="inbox/secret.md", find="swordfish", replace="marlin")
    await env.ok("vault_read", path="inbox/secret.md", full=True)
    await env.ok("vault_find", query="合言葉")
    await env.ok("vault_search", query="marlin")
    await env.ok("vault_scan", path="inbox/secret.md")
    await env.ok("vault_coverage", path="inbox/secret.md", cited_ranges=[{"start_line": 1, "end_line": 1}])
    await env.err("vault_read", path="../x.md", full=True)
    env.container.runtime.deferred.flush()  # reads and failures are audited by deferred writes
    events = {e.tool: _without_request_id(e) for e in env.container.runtime.store.iter_events()}
    assert events["vault_create"].detail == {
        "path": "inbox/secret.md",
        "written_bytes": len((secret + "\n").encode()),
    }
    assert events["vault_write"].detail == {
        "path": "inbox/secret.md",
        "mode": "append",
        "written_bytes": len(secret.encode()),
    }
    assert events["vault_replace"].detail == {"path": "inbox/secret.md", "replacements": 1}
    assert events["vault_read"].outcome == "out_of_scope"
    find = events["vault_find"].detail
    assert set(find) == {
        "trace_id", "candidates", "integrated_candidates", "file_bias_ratio", "gap_ranges_count",
        "sufficiency_score", "integration_status", "next_actions",
    }  # fmt: skip
    assert set(events["vault_scan"].detail) == {"path", "applied_range", "eof", "truncated_reason"}
    assert set(events["vault_coverage"].detail) == {
        "path",
        "coverage_ratio",
        "covered_ranges",
        "uncovered_ranges",
    }
    for event in events.values():
        assert "swordfish" not in str(event.detail) and "合言葉" not in str(event.detail)


async def test_calls_are_logged_to_stderr_without_note_text(
    env: VaultEnv, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="memhub.vault"):
        await env.ok("vault_create", path="inbox/log.md", content="秘密の本文 hunter2\n")
        await env.ok("vault_read", path="inbox/log.md", range={"start_line": 1})
    lines = [  # each line names the call's request id first: correlation with the audit log
        re.sub(r'"request_id": "[0-9a-f]{32}", ', "", r.getMessage())
        for r in caplog.records
        if r.name == "memhub.vault"
    ]
    assert lines == [
        'vault_create {"path": "inbox/log.md", "written_bytes": 24}',
        'vault_read {"path": "inbox/log.md", "truncated": false}',
    ]
    assert "hunter2" not in caplog.text


async def test_concurrent_appends_through_memhub_all_land(env: VaultEnv) -> None:
    await env.ok("vault_create", path="inbox/many.md", content="")

    async def append(i: int) -> None:
        await env.ok("vault_write", path="inbox/many.md", content=f"- {i}\n", mode="append")

    async with anyio.create_task_group() as tasks:
        for i in range(12):
            tasks.start_soon(append, i)
    lines = (env.root / "inbox/many.md").read_text(encoding="utf-8").splitlines()
    assert sorted(lines) == sorted(f"- {i}" for i in range(12))


def _without_request_id(event: EventRow) -> EventRow:
    assert len(event.detail.pop("request_id")) == 32  # every call's event carries its request id
    return event


def _wiki_edges(env: VaultEnv) -> set[tuple[str, int, str, int]]:
    """(source path, source section start, target path, target section start) of every wiki link."""
    query = (
        "SELECT s.attrs, d.attrs FROM links l JOIN items s ON s.id = l.src JOIN items d ON d.id = l.dst"
        " WHERE l.type = 'wiki_link'"
    )
    edges = set()
    for src, dst in rows(env.container.settings.db_url, query):
        a, b = json.loads(src), json.loads(dst)
        edges.add((a["path"], a["lines"][0], b["path"], b["lines"][0]))
    return edges


async def test_wiki_links_become_edges_between_sections(env: VaultEnv) -> None:
    _fast_sync(env)
    checklist = "projects/memhub/Release checklist.md"
    await env.ok("vault_ls")
    edges = _wiki_edges(env)
    assert (DESIGN, 23, checklist, 1) in edges  # 安全 section -> [[Release checklist]]
    assert (checklist, 1, DESIGN, 1) in edges  # See also [[設計方針]]
    assert ("summaries/設計要約.md", 1, DESIGN, 1) in edges  # front matter source: "[[設計方針]]"
    # the target re-indexed after an outside edit: the link into it follows the new items
    note = env.root / checklist
    note.write_text(note.read_text(encoding="utf-8") + "- edited outside\n", encoding="utf-8")
    await env.ok("vault_ls")
    assert (DESIGN, 23, checklist, 1) in _wiki_edges(env)
    # a link written before its target exists is made when the target appears
    await env.ok("vault_create", path="inbox/a.md", content="# A\n\n次は [[まだない]] を書く\n")
    await env.ok("vault_create", path="inbox/まだない.md", content="# まだない\n")
    assert ("inbox/a.md", 1, "inbox/まだない.md", 1) in _wiki_edges(env)
