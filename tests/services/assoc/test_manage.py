"""assoc `memory_manage`, `project`, `visualize` and `admin` through the real MCP client."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers import FixedClock
from tests.pair import Pair
from tests.store.backends import postgres_only, sqlite_only

pytestmark = pytest.mark.anyio


async def _seed(p: Pair) -> list[str]:
    await p.a("user", action="create_session", session_name="seed")
    ids = []
    for content, domain, tags, category in [
        ("TypeScriptの型安全性について", "user", ["typescript"], "lang"),
        ('CSV, "quotes" and\nnewlines survive', "user", ["io", "csv"], "io"),
        ("機械学習の評価指標はF1", "global", ["ml"], "research"),
        ("今日のセッションのメモ", "session", [], None),
    ]:
        out = await p.a(
            "memory",
            action="store",
            content=content,
            domain=domain,
            tags=tags,
            **({"category": category} if category else {}),
        )
        ids.append(out["memory"]["id"])
    return ids


async def test_stats_and_categories(pair: Pair) -> None:
    await _seed(pair)
    stats = (await pair.a("memory_manage", action="stats"))["stats"]
    assert stats["memories"] == 4 and stats["by_domain"] == {"user": 2, "global": 1, "session": 1}
    assert stats["top_tags"]["typescript"] == 1
    user_only = (await pair.a("memory_manage", action="stats", target_domain="user"))["stats"]
    assert user_only["memories"] == 2
    categories = await pair.a("memory_manage", action="list_categories")
    assert categories["categories"] == {"lang": 1, "io": 1, "research": 1}
    bob = (await pair.b("memory_manage", action="stats"))["stats"]
    assert bob["memories"] == 1  # only the global one


async def test_export_import_round_trip_json(pair: Pair) -> None:
    ids = await _seed(pair)
    await pair.a("memory", action="update", memory_id=ids[1], related_memory_ids=[ids[0]])
    exported = await pair.a("memory_manage", action="export", export_format="json")
    assert exported["count"] == 4
    data = json.loads(exported["data"])
    assert data["format"] == "memhub.assoc.export/v1"
    assert any(a["type"] == "manual" for a in data["associations"])

    imported = await pair.b(
        "memory_manage",
        action="import",
        import_data=json.dumps(
            [{k: v for k, v in r.items()} for r in data["memories"] if r["domain"] != "session"]
        ),
    )
    assert imported["count"] == 3
    # a full re-import by alice keeps contents, tags, categories and the manual association
    again = await pair.a("memory_manage", action="import", import_data=exported["data"])
    assert again["count"] == 4
    second = json.loads((await pair.a("memory_manage", action="export", target_domain="user"))["data"])
    originals = {r["content"]: r for r in data["memories"] if r["domain"] == "user"}
    copies = [r for r in second["memories"] if r["id"] not in ids]
    assert {r["content"] for r in copies} == set(originals)
    for copy in copies:
        source = originals[copy["content"]]
        assert (copy["tags"], copy["category"], copy["importance"]) == (
            source["tags"],
            source["category"],
            source["importance"],
        )
    assert any(a["type"] == "manual" for a in second["associations"])


async def test_export_csv_and_markdown(pair: Pair) -> None:
    await _seed(pair)
    out = await pair.a("memory_manage", action="export", export_format="csv", target_domain="user")
    rows = list(csv.DictReader(io.StringIO(out["data"])))
    assert {r["content"] for r in rows} == {
        "TypeScriptの型安全性について",
        'CSV, "quotes" and\nnewlines survive',
    }
    assert {r["tags"] for r in rows} == {"typescript", "io;csv"}
    md = (await pair.a("memory_manage", action="export", export_format="markdown"))["data"]
    assert md.startswith("# Memories (4)") and "> TypeScriptの型安全性について" in md


async def test_bad_import_names_the_line_and_writes_nothing(pair: Pair) -> None:
    await _seed(pair)
    exported = (await pair.a("memory_manage", action="export"))["data"]
    lines = exported.splitlines()
    broken_line = 3  # the second memory record
    record = json.loads(lines[broken_line - 1].rstrip(","))
    record["domain"] = "galaxy"
    lines[broken_line - 1] = json.dumps(record, ensure_ascii=False) + ","
    before = await pair.counts()
    err = await pair.a_err("memory_manage", action="import", import_data="\n".join(lines))
    assert err["error"]["code"] == "invalid_parameter"
    assert f"line {broken_line}" in err["error"]["message"] and "record 2" in err["error"]["message"]
    for bad in [
        "{not json",
        "[1, 2]",
        '{"memories": 5}',
        '[{"content": "x", "domain": "project", "project": "nope"}]',
    ]:
        assert (await pair.a_err("memory_manage", action="import", import_data=bad))["error"]["code"] in (
            "invalid_parameter",
            "not_found",
        )
    assert await pair.counts() == before


async def test_change_domain_batch_delete_cleanup(pair: Pair) -> None:
    ids = await _seed(pair)
    project = (await pair.a("project", action="create", name="p"))["project"]["id"]
    moved = await pair.a(
        "memory_manage", action="change_domain", memory_ids=ids[:2], new_domain="project", project_id=project
    )
    assert moved["count"] == 2
    assert (await pair.a("memory", action="get", memory_id=ids[0]))["memory"]["project_id"] == project

    # all or nothing: bob owns none of these
    before = await pair.counts()
    err = await pair.b_err("memory_manage", action="batch_delete", memory_ids=[ids[2]])
    assert err["error"]["code"] == "permission_denied"
    err = await pair.a_err("memory_manage", action="batch_delete", memory_ids=[ids[0], "mem_999999"])
    assert err["error"]["code"] == "not_found"
    assert await pair.counts() == before
    dry = await pair.a("memory_manage", action="batch_delete", memory_ids=ids[:2], dry_run=True)
    assert dry["count"] == 2 and await pair.counts() == before
    await pair.a("memory_manage", action="batch_delete", memory_ids=ids[:2])
    assert (await pair.a_err("memory", action="get", memory_id=ids[1]))["error"]["code"] == "not_found"

    kept = await pair.a(
        "memory_manage", action="cleanup", target_domain="session", cleanup_before="2000-01-01T00:00:00Z"
    )
    assert kept["count"] == 0
    gone = await pair.a(
        "memory_manage", action="cleanup", target_domain="session", cleanup_before="2999-01-01T00:00:00Z"
    )
    assert gone["count"] == 1
    assert (
        await pair.a_err("memory_manage", action="cleanup", target_domain="user", cleanup_before="2999-01-01")
    )["error"]["code"] == "invalid_parameter"
    assert (await pair.a_err("memory_manage", action="cleanup", cleanup_before="soon"))["error"]["code"] == (
        "invalid_parameter"
    )


async def test_project_lifecycle(pair: Pair) -> None:
    pid = (await pair.a("project", action="create", name="life", description="d"))["project"]["id"]
    assert (await pair.a_err("project", action="create", name="life"))["error"]["code"] == "conflict"
    await pair.a("project", action="update", project_id=pid, description="new")
    got = (await pair.a("project", action="get", project_id=pid))["project"]
    assert got["description"] == "new" and got["members"] == [
        {"user_id": "alice", "role": "owner", "joined_at": got["members"][0]["joined_at"]}
    ]
    await pair.a("memory", action="store", content="inside", domain="project", project_id=pid)
    err = await pair.a_err("project", action="delete", project_id=pid)
    assert err["error"]["code"] == "invalid_parameter" and "force" in err["error"]["message"]
    assert (await pair.b_err("project", action="delete", project_id=pid, force=True))["error"][
        "code"
    ] == "not_found"
    assert (await pair.a("project", action="delete", project_id=pid, force=True))["deleted"] == pid
    assert (await pair.a_err("project", action="get", project_id=pid))["error"]["code"] == "not_found"
    assert (await pair.a_err("project", action="remove_member", project_id="proj_1", user_id="alice"))[
        "error"
    ]["code"] in ("invalid_parameter", "not_found")


@pytest.mark.parametrize(
    "kind", ["memory_map", "stats_dashboard", "domain_graph", "timeline", "category_chart"]
)
async def test_visualize_renders_real_formats(pair: Pair, kind: str) -> None:
    ids = await _seed(pair)
    await pair.a(
        "memory",
        action="store",
        content="<script>alert('x')</script> SQLite",
        domain="user",
        related_memory_ids=[ids[0]],
    )
    extra = {"center_memory_id": ids[0]} if kind == "memory_map" else {}
    for fmt in ("svg", "html", "json", "graphviz"):
        out = await pair.a("visualize", type=kind, format=fmt, **extra)
        content = out["content"]
        assert len(content) < 500_000
        if fmt in ("svg", "html"):
            assert "<script>alert" not in content  # user text is escaped where a browser renders it
        if fmt == "svg":
            assert ET.fromstring(content).tag.endswith("svg")
        elif fmt == "html":
            assert content.lower().startswith("<!doctype html>") and "<svg" in content
        elif fmt == "json":
            json.loads(content)
        else:
            assert "graph" in content.split("{", 1)[0]
            if shutil.which("dot"):
                done = subprocess.run(
                    ["dot", "-Tsvg"], input=content, capture_output=True, text=True, timeout=30
                )
                assert done.returncode == 0, done.stderr
    if kind == "memory_map":
        assert (await pair.a("visualize", type=kind, format="json", **extra))["nodes"] >= 2
        assert (await pair.b_err("visualize", type=kind, center_memory_id=ids[0]))["error"][
            "code"
        ] == "not_found"


async def test_admin_actions(pair: Pair) -> None:
    ids = await _seed(pair)
    health = await pair.b("admin", action="health_check")
    assert health["status"] == "ok" and health["details"]["database"] == "ok", health
    assert (await pair.b_err("admin", action="system_stats"))["error"]["code"] == "permission_denied"
    assert (await pair.b_err("admin", action="backup", backup_path="x.db"))["error"]["code"] == (
        "permission_denied"
    )
    stats = await pair.a("admin", action="system_stats")
    assert stats["details"]["tables"]["items"] == 4

    reindexed = await pair.a("admin", action="reindex")
    assert reindexed["details"]["text_indexed"] == 4 and reindexed["details"]["vectors_embedded"] == 4
    found = await pair.a("memory", action="search", query="TypeScript", threshold=0.0)
    assert found["memories"][0]["id"] == ids[0]
    cleaned = await pair.a("admin", action="cleanup_orphans")
    assert set(cleaned["details"]["removed"]) >= {"expired_items", "dangling_links", "stale_vectors"}

    config = {"source_domain": "user", "target_domain": "global", "filter_criteria": {"category": "lang"}}
    dry = await pair.a("admin", action="migrate_domain", migration_config=config)
    assert dry["status"] == "dry_run" and dry["details"]["matched"] == 1
    assert (await pair.b_err("memory", action="get", memory_id=ids[0]))["error"]["code"] == "not_found"
    await pair.a("admin", action="migrate_domain", migration_config=config, force=True)
    assert (await pair.b("memory", action="get", memory_id=ids[0]))["memory"]["domain"] == "global"
    bad = {"source_domain": "user", "target_domain": "project", "filter_criteria": {}}
    assert (await pair.a_err("admin", action="migrate_domain", migration_config=bad))["error"]["code"] == (
        "invalid_parameter"
    )


@sqlite_only("backups")
async def test_admin_backup_and_restore(pair: Pair, tmp_path: Path) -> None:
    ids = await _seed(pair)
    backup = tmp_path / "backups" / "backup.db"  # tool calls name files in the backups folder only
    made = await pair.a("admin", action="backup", backup_path="backup.db")
    assert backup.is_file() and made["details"]["bytes"] > 0
    assert (await pair.a_err("admin", action="backup", backup_path="backup.db"))["error"][
        "code"
    ] == "conflict"
    await pair.a("admin", action="backup", backup_path="partial.db", include_data=["projects", "sessions"])

    later = (await pair.a("memory", action="store", content="written after the backup", domain="user"))[
        "memory"
    ]["id"]
    verified = await pair.a("admin", action="restore", backup_path="backup.db")
    assert verified["status"] == "verified" and (await pair.a("memory", action="get", memory_id=later))
    restored = await pair.a("admin", action="restore", backup_path="backup.db", force=True)
    assert restored["details"]["restored"] is True
    assert (await pair.a_err("memory", action="get", memory_id=later))["error"]["code"] == "not_found"
    assert (await pair.a("memory", action="get", memory_id=ids[0]))["memory"][
        "content"
    ] == "TypeScriptの型安全性について"
    garbage = tmp_path / "backups" / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    assert (await pair.a_err("admin", action="restore", backup_path="garbage.db", force=True))["error"][
        "code"
    ] == ("invalid_parameter")
    assert (await pair.a_err("admin", action="restore", backup_path="missing.db"))["error"][
        "code"
    ] == "not_found"


@postgres_only
async def test_admin_backup_and_restore_on_postgresql_point_to_pg_dump(pair: Pair, tmp_path: Path) -> None:
    """The admin tool's backup and restore on PostgreSQL: `unavailable`, one line naming
    pg_dump/pg_restore and no server path; nothing is written."""
    await _seed(pair)
    for arguments in ({"action": "backup"}, {"action": "restore", "backup_path": "backup.db"}):
        error = (await pair.a_err("admin", **arguments))["error"]
        assert error["code"] == "unavailable", error
        assert "pg_dump" in error["message"] and "pg_restore" in error["message"], error
        assert "\n" not in error["message"] and str(tmp_path) not in error["message"]
    assert not (tmp_path / "backups").exists()
    assert (await pair.a("admin", action="system_stats"))["details"]["tables"]["items"] == 4


async def test_long_import_and_reindex_report_progress(pair: Pair) -> None:
    records = [json.dumps({"content": f"imported note {i}", "domain": "user"}) for i in range(2_500)]
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    result = await pair.alice.call_tool(
        "memory_manage",
        {"action": "import", "import_data": "[\n" + ",\n".join(records) + "\n]"},
        progress_callback=on_progress,
    )
    assert not result.is_error and result.structured_content["count"] == 2_500
    assert [(d, t) for d, t, _ in seen] == [(1000, 2500), (2000, 2500)]
    assert seen[0][2] == "imported 1000 of 2500"

    seen.clear()
    result = await pair.alice.call_tool("admin", {"action": "reindex"}, progress_callback=on_progress)
    assert not result.is_error and result.structured_content["details"]["vectors_embedded"] >= 2_500
    assert seen and seen[0] == (0, 2_500, "embedding")


async def test_export_then_import_keeps_times_and_authors(pair: Pair) -> None:
    """A restore from a json export keeps created_at and updated_at, so timerange and cleanup work
    off the original times; only an admin keeps another (existing) user's authorship."""
    store = pair.container.runtime.store
    real_clock = store.clock  # type: ignore[attr-defined]
    store.clock = FixedClock(datetime(2025, 1, 1, 9, 0, tzinfo=UTC))  # type: ignore[attr-defined]
    ids = await _seed(pair)
    store.clock = FixedClock(datetime(2025, 2, 1, 9, 0, tzinfo=UTC))  # type: ignore[attr-defined]
    await pair.a("memory", action="update", memory_id=ids[0], importance=0.9)
    store.clock = real_clock  # type: ignore[attr-defined]
    exported = await pair.a("memory_manage", action="export", export_format="json")
    originals = {r["content"]: r for r in json.loads(exported["data"])["memories"]}
    assert originals["TypeScriptの型安全性について"]["updated_at"].startswith("2025-02-01")
    await pair.a("memory_manage", action="batch_delete", memory_ids=ids)
    imported = await pair.a("memory_manage", action="import", import_data=exported["data"])
    assert imported["count"] == 4
    again = json.loads((await pair.a("memory_manage", action="export"))["data"])["memories"]
    assert len(again) == 4
    for copy in again:
        source = originals[copy["content"]]
        assert (copy["created_at"], copy["updated_at"]) == (source["created_at"], source["updated_at"])
        assert copy["author_id"] == "alice"
    window = await pair.a(
        "search", type="timerange", start_time="2024-12-31T00:00:00Z", end_time="2025-01-02T00:00:00Z"
    )
    assert {m["content"] for m in window["memories"]} == set(originals)
    old = await pair.a("memory_manage", action="cleanup", cleanup_before="2025-01-02T00:00:00Z", dry_run=True)
    assert old["count"] == 1  # the imported session memory, by its original time

    # authorship: bob (no admin) cannot file memories under alice's name; alice (admin) restores bob's
    record = {
        "content": "誰のメモ",
        "domain": "user",
        "author_id": "alice",
        "created_at": "2024-05-01T00:00:00Z",
    }
    made = await pair.b("memory_manage", action="import", import_data=json.dumps([record]))
    got = (await pair.b("memory", action="get", memory_id=made["memory_ids"][0]))["memory"]
    assert got["author_id"] == "bob" and got["created_at"].startswith("2024-05-01")
    restored = await pair.a(
        "memory_manage", action="import", import_data=json.dumps([{**record, "author_id": "bob"}])
    )
    got = (await pair.b("memory", action="get", memory_id=restored["memory_ids"][0]))["memory"]
    assert got["author_id"] == "bob" and got["user_id"] == "bob"
    before = await pair.counts()
    for bad, words in (
        ({**record, "author_id": "ghost"}, "not a user"),
        ({**record, "created_at": "2999-01-01T00:00:00Z"}, "future"),
        ({**record, "updated_at": "yesterday"}, "updated_at"),
    ):
        err = await pair.a_err("memory_manage", action="import", import_data=json.dumps([bad]))
        assert err["error"]["code"] == "invalid_parameter" and words in err["error"]["message"], err
    assert await pair.counts() == before


async def test_import_does_not_tell_a_private_project_from_a_free_name(pair: Pair) -> None:
    await pair.a("project", action="create", name="secret-plans")

    async def refusal(name: str) -> str:
        record = {"content": "x", "domain": "project", "project": name}
        err = await pair.b_err("memory_manage", action="import", import_data=json.dumps([record]))
        return str(err["error"]["message"]).replace(name, "NAME")

    private, free = await refusal("secret-plans"), await refusal("no-such-project")
    assert private == free and "proj_" not in private, (private, free)
