"""assoc `memory` and `search` through the real MCP client, with access control across two users."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from memhub.cli.container import build_container
from tests.conftest import make_settings
from tests.helpers import error, ok
from tests.pair import Pair, settled
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


async def _store(p: Pair, content: str, domain: str = "user", **extra: object) -> str:
    out = await p.a("memory", action="store", content=content, domain=domain, **extra)
    return str(out["memory"]["id"])


async def test_store_get_update_delete(pair: Pair) -> None:
    out = await pair.a(
        "memory",
        action="store",
        content="TypeScriptの型安全性について",
        domain="user",
        tags=["programming", "typescript", "typescript"],
        category="notes",
        importance=0.8,
        metadata={"source": "chat"},
    )
    memory = out["memory"]
    assert memory["id"].startswith("mem_")
    assert memory["tags"] == ["programming", "typescript"]
    assert memory["domain"] == "user" and memory["user_id"] == "alice" and memory["author_id"] == "alice"
    assert memory["metadata"] == {"source": "chat"} and memory["importance"] == 0.8

    got = await pair.a("memory", action="get", memory_id=memory["id"])
    assert got["memory"]["access_count"] == 1
    got = await pair.a("memory", action="get", memory_id=memory["id"])
    assert got["memory"]["access_count"] == 2

    updated = await pair.a(
        "memory", action="update", memory_id=memory["id"], content="更新された内容", tags=["updated"]
    )
    assert updated["memory"]["content"] == "更新された内容" and updated["memory"]["tags"] == ["updated"]
    found = await pair.a("memory", action="search", query="更新", threshold=0.0)
    assert [m["id"] for m in found["memories"]] == [memory["id"]]

    deleted = await pair.a("memory", action="delete", memory_id=memory["id"])
    assert deleted["deleted"] == [memory["id"]]
    assert (await pair.a_err("memory", action="get", memory_id=memory["id"]))["error"]["code"] == "not_found"


async def test_user_domain_is_private(pair: Pair) -> None:
    private = await _store(pair, "alice's private API token location", "user")
    public = await _store(pair, "team convention: use ruff for linting", "global")
    assert (await pair.b_err("memory", action="get", memory_id=private))["error"]["code"] == "not_found"
    assert (await pair.b("memory", action="get", memory_id=public))["memory"]["domain"] == "global"
    seen = await pair.b("memory", action="search", query="alice private token ruff linting", threshold=0.0)
    assert [m["id"] for m in seen["memories"]] == [public]
    for kind in ("tags", "timerange", "advanced"):
        args = (
            {"tags": ["x"]}
            if kind == "tags"
            else {"start_time": "2000-01-01T00:00:00Z"}
            if kind == "timerange"
            else {}
        )
        result = await pair.b("search", type=kind, **args)
        assert private not in [m["id"] for m in result["memories"]]
    # bob may read the global memory but not change it
    assert (await pair.b_err("memory", action="update", memory_id=public, content="x"))["error"]["code"] == (
        "permission_denied"
    )
    assert (await pair.b_err("memory", action="delete", memory_id=private))["error"]["code"] == "not_found"


async def test_project_roles_editor_and_viewer(pair: Pair) -> None:
    project = (await pair.a("project", action="create", name="AIプロジェクト", description="機械学習研究"))[
        "project"
    ]
    pid = project["id"]
    assert pid.startswith("proj_") and project["role"] == "owner"
    secret = await _store(pair, "モデルの学習率は3e-4にする", "project", project_id=pid)

    # not a member: sees nothing of the project
    assert (await pair.b_err("memory", action="get", memory_id=secret))["error"]["code"] == "not_found"
    assert (await pair.b_err("project", action="get", project_id=pid))["error"]["code"] == "not_found"
    found = await pair.b("search", type="semantic", query="学習率", threshold=0.0)
    assert found["memories"] == []

    # viewer: reads, cannot write
    await pair.a("project", action="add_member", project_id=pid, user_id="bob", role="viewer")
    assert (await pair.b("memory", action="get", memory_id=secret))["memory"]["project_id"] == pid
    denied = await pair.b_err("memory", action="store", content="x", domain="project", project_id=pid)
    assert denied["error"]["code"] == "permission_denied"
    denied = await pair.b_err("memory", action="update", memory_id=secret, content="changed")
    assert denied["error"]["code"] == "permission_denied"
    listed = await pair.b("project", action="list", role_filter="viewer")
    assert [p["id"] for p in listed["projects"]] == [pid]
    assert (await pair.b("project", action="list", role_filter="editor"))["projects"] == []

    # editor: writes, also the owner's memories of the project
    await pair.a("project", action="add_member", project_id=pid, user_id="bob", role="editor")
    mine = (
        await pair.b("memory", action="store", content="batch size 64", domain="project", project_id=pid)
    )["memory"]
    assert mine["author_id"] == "bob"
    await pair.b("memory", action="update", memory_id=secret, importance=0.9)
    # but cannot manage members
    assert (await pair.b_err("project", action="add_member", project_id=pid, user_id="carol", role="viewer"))[
        "error"
    ]["code"] == "permission_denied"

    # removed: sees nothing again
    await pair.a("project", action="remove_member", project_id=pid, user_id="bob")
    assert (await pair.b_err("memory", action="get", memory_id=mine["id"]))["error"]["code"] == "not_found"


async def test_sessions_scope_session_memories(pair: Pair) -> None:
    err = await pair.a_err("memory", action="store", content="x", domain="session")
    assert err["error"]["code"] == "invalid_parameter" and "session" in err["error"]["message"]
    first = (await pair.a("user", action="create_session", session_name="開発セッション2024"))["session"]
    assert first["id"].startswith("sess_") and first["current"] is True
    note = await _store(pair, "この会話ではpytestを使う", "session")
    found = await pair.a(
        "memory", action="search", query="pytest", include_domains=["session"], threshold=0.0
    )
    assert [m["id"] for m in found["memories"]] == [note]

    second = (await pair.a("user", action="create_session", session_name="next"))["session"]
    found = await pair.a(
        "memory", action="search", query="pytest", include_domains=["session"], threshold=0.0
    )
    assert found["memories"] == []
    await pair.a("user", action="switch_session", session_id=first["id"])
    current = await pair.a("user", action="get_current", include_stats=True)
    assert current["current_session"]["id"] == first["id"]
    assert current["stats"]["memories_by_domain"] == {"session": 1}
    sessions = await pair.a("user", action="get_sessions")
    assert {s["id"] for s in sessions["sessions"]} == {first["id"], second["id"]}

    # filter searches apply the same rule: only the current session's memories
    tagged = await pair.a("memory", action="store", content="tagged in second", domain="session", tags=["s"])
    await pair.a("user", action="switch_session", session_id=second["id"])
    assert (await pair.a("search", type="tags", tags=["s"]))["memories"] == []
    everything = await pair.a("search", type="timerange", start_time="2000-01-01T00:00:00Z")
    assert tagged["memory"]["id"] not in [m["id"] for m in everything["memories"]]
    await pair.a("user", action="switch_session", session_id=first["id"])
    assert [m["id"] for m in (await pair.a("search", type="tags", tags=["s"]))["memories"]] == [
        tagged["memory"]["id"]
    ]

    ended = await pair.a("user", action="end_session", session_id=first["id"])
    assert ended["session"]["status"] == "ended"
    assert "current_session" not in await pair.a("user", action="get_current")
    assert (await pair.a_err("user", action="switch_session", session_id=first["id"]))["error"]["code"] == (
        "invalid_parameter"
    )
    # other users' sessions do not exist for bob
    assert (await pair.b_err("user", action="switch_session", session_id=second["id"]))["error"][
        "code"
    ] == "not_found"


async def test_associations_semantic_temporal_manual_and_related(pair: Pair) -> None:
    await pair.a("user", action="create_session", session_name="assoc")
    a = await _store(pair, "SQLite WAL mode lets readers and writers work concurrently")
    b_out = await pair.a(
        "memory", action="store", content="SQLite WAL mode readers writers concurrently", domain="user"
    )
    b = b_out["memory"]["id"]
    assert [(x["to_memory_id"], x["type"]) for x in b_out["associations"]] == [(a, "temporal")]
    await settled(pair.container)  # semantic links follow the vector, made in the background
    got = await pair.a("memory", action="get", memory_id=b)
    kinds = {(x["to_memory_id"], x["type"]) for x in got["associations"]}
    assert (a, "semantic") in kinds and (a, "temporal") in kinds
    session = (await pair.a("user", action="get_current"))["current_session"]["id"]
    await pair.a("user", action="end_session", session_id=session)  # c: no temporal links
    c_out = await pair.a(
        "memory", action="store", content="unrelated: lunch at noon", domain="user", related_memory_ids=[b]
    )
    c = c_out["memory"]["id"]
    assert any(
        x["to_memory_id"] == b and x["type"] == "manual" and x["strength"] == 1.0
        for x in c_out["associations"]
    )

    one = await pair.a("memory", action="get_related", memory_id=c, depth=1)
    assert [r["memory"]["id"] for r in one["related"]] == [b]
    two = await pair.a("memory", action="get_related", memory_id=c, depth=2)
    depths = {r["memory"]["id"]: r["depth"] for r in two["related"]}
    assert depths[b] == 1 and depths[a] == 2
    assert all(0 < r["strength"] <= 1 for r in two["related"])

    # bob cannot walk into alice's private memories
    await pair.a("memory", action="update", memory_id=c, metadata={"note": "x"})
    assert (await pair.b_err("memory", action="get_related", memory_id=c))["error"]["code"] == "not_found"


async def test_search_types(pair: Pair) -> None:
    ts = await _store(
        pair,
        "TypeScriptの型安全性について",
        tags=["programming", "typescript"],
        category="lang",
        importance=0.9,
    )
    py = await _store(
        pair,
        "Python type hints and mypy strict mode",
        tags=["programming", "python"],
        category="lang",
        importance=0.3,
    )
    ml = await _store(
        pair, "機械学習の評価指標はF1を使う", "global", tags=["ml"], category="research", importance=0.7
    )

    tags = await pair.a("search", type="tags", tags=["programming", "typescript"])
    assert [m["id"] for m in tags["memories"]][:2] == [ts, py]
    timerange = await pair.a(
        "search", type="timerange", start_time="2000-01-01T00:00:00Z", end_time="2999-01-01T00:00:00Z"
    )
    assert [m["id"] for m in timerange["memories"]] == [ml, py, ts]
    none = await pair.a("search", type="timerange", end_time="2000-01-01T00:00:00Z")
    assert none["memories"] == []
    advanced = await pair.a(
        "search",
        type="advanced",
        query="機械学習",
        filters={"domains": ["user", "global"], "categories": ["research"], "importance_min": 0.7},
        threshold=0.0,
    )
    assert [m["id"] for m in advanced["memories"]] == [ml]
    by_importance = await pair.a("search", type="advanced", filters={"categories": ["lang"]})
    assert [m["id"] for m in by_importance["memories"]] == [ts, py]
    semantic = await pair.a("search", type="semantic", query="mypy", threshold=0.0)
    assert semantic["memories"][0]["id"] == py and 0 <= semantic["memories"][0]["similarity"] <= 1
    similar = await pair.a("search", type="similar", memory_id=py, threshold=0.0)
    assert py not in [m["id"] for m in similar["memories"]] and similar["memories"]

    for bad, code in [
        ({"type": "semantic"}, "invalid_parameter"),
        ({"type": "tags"}, "invalid_parameter"),
        ({"type": "timerange"}, "invalid_parameter"),
        ({"type": "timerange", "start_time": "yesterday"}, "invalid_parameter"),
        ({"type": "similar"}, "invalid_parameter"),
        ({"type": "similar", "memory_id": "mem_99999"}, "not_found"),
        ({"type": "similar", "memory_id": "nonsense"}, "invalid_parameter"),
        (
            {"type": "advanced", "filters": {"importance_min": 0.9, "importance_max": 0.1}},
            "invalid_parameter",
        ),
        ({"type": "semantic", "query": "x", "limit": 1000}, "invalid_parameter"),
        ({"type": "nope"}, "invalid_parameter"),
    ]:
        assert (await pair.a_err("search", **bad))["error"]["code"] == code, bad


async def test_threshold_and_ranking(pair: Pair) -> None:
    low = await _store(pair, "deploy checklist: run migrations", importance=0.1)
    high = await _store(pair, "deploy checklist: run migrations first", importance=1.0)
    ranked = await pair.a("memory", action="search", query="deploy checklist migrations", threshold=0.0)
    assert [m["id"] for m in ranked["memories"]][:2] == [high, low]
    assert ranked["memories"][0]["score"] >= ranked["memories"][1]["score"]
    strict = await pair.a("memory", action="search", query="deploy checklist migrations", threshold=0.99)
    assert all(m["similarity"] >= 0.99 for m in strict["memories"])
    nothing = await pair.a("memory", action="search", query="zzzz qqqq", threshold=0.7)
    assert nothing["memories"] == []


async def test_memory_bad_input_changes_nothing(pair: Pair) -> None:
    keep = await _store(pair, "keep me")
    before = await pair.counts()
    for arguments, code in [
        ({}, "invalid_parameter"),
        ({"action": "fly"}, "invalid_parameter"),
        ({"action": "store", "domain": "user"}, "invalid_parameter"),
        ({"action": "store", "content": "x"}, "invalid_parameter"),
        ({"action": "store", "content": "x", "domain": "planet"}, "invalid_parameter"),
        ({"action": "store", "content": "x", "domain": "project"}, "invalid_parameter"),
        ({"action": "store", "content": "x", "domain": "project", "project_id": "proj_999"}, "not_found"),
        ({"action": "store", "content": "x", "domain": "user", "importance": 1.5}, "invalid_parameter"),
        ({"action": "store", "content": "x" * 40_000, "domain": "user"}, "invalid_parameter"),
        (
            {"action": "store", "content": "x", "domain": "user", "related_memory_ids": ["mem_999"]},
            "not_found",
        ),
        ({"action": "store", "content": "bad \ud800", "domain": "user"}, "invalid_parameter"),
        ({"action": "store", "content": "x", "domain": "user", "tags": "notalist"}, "invalid_parameter"),
        ({"action": "search"}, "invalid_parameter"),
        ({"action": "search", "query": 'NEAR( " *', "threshold": 2}, "invalid_parameter"),
        ({"action": "get"}, "invalid_parameter"),
        ({"action": "get", "memory_id": "mem_abc"}, "invalid_parameter"),
        ({"action": "get", "memory_id": "mem_99999999999999999999999"}, "invalid_parameter"),
        ({"action": "update", "memory_id": keep}, "invalid_parameter"),
        ({"action": "update", "memory_id": keep, "content": "   "}, "invalid_parameter"),
        ({"action": "delete", "memory_id": "mem_424242"}, "not_found"),
        ({"action": "get_related", "memory_id": keep, "depth": 50}, "invalid_parameter"),
    ]:
        err = await pair.a_err("memory", **arguments)
        assert err["error"]["code"] == code, (arguments, err)
    for trick in ['"', "*", "NEAR(", "OR", "a OR b", "(((", "-x"]:
        await pair.a("memory", action="search", query=trick)
    assert await pair.counts() == before


async def test_projects_are_shared_with_the_discussion_toolset(pair: Pair) -> None:
    created = (await pair.a("project", action="create", name="shared-project"))["project"]
    listed = await pair.a("get-projects")
    number = int(created["id"].removeprefix("proj_"))
    assert [p["id"] for p in listed["projects"]] == [number]
    topic = await pair.a("add-topic", project_id=number, title="from discussion")
    mine = await pair.a("user", action="get_projects", include_stats=True)
    assert [(p["id"], p["role"]) for p in mine["projects"]] == [(created["id"], "owner")]
    assert mine["projects"][0]["stats"]["records"] == {"topic": 1}
    assert (await pair.b("user", action="get_projects"))["projects"] == []
    got = await pair.a("project", action="get", project_id=created["id"])
    assert got["project"]["stats"]["records_by_kind"] == {"topic": 1}
    assert topic["project_id"] == number


async def test_search_without_an_embedder_and_without_matches(tmp_path: Path, backend: Backend) -> None:
    """Keyword-only memhub (`--embedder none`): no candidates is an empty answer, not an error."""
    container = build_container(make_settings(tmp_path, backend, embedder="none", toolsets=("assoc",)))
    async with Client(container.server) as client:
        await ok(client, "memory", action="store", content="hello world", domain="user")
        assert (await ok(client, "memory", action="search", query="zzzz", threshold=0.0))["memories"] == []
        found = await ok(client, "memory", action="search", query="hello", threshold=0.0)
        assert [m["content"] for m in found["memories"]] == ["hello world"]
        assert (await ok(client, "search", type="semantic", query="nothing here"))["memories"] == []
        unavailable = await error(client, "search", {"type": "similar", "memory_id": "mem_1"})
        assert unavailable["code"] == "unavailable"
    container.close()


async def test_search_filters_project_ids_mean_only_those_projects(pair: Pair) -> None:
    """`filters.project_ids` ("only these projects"): no user, global or session memory beside them,
    and no memory of another project, whichever search type."""
    one = (await pair.a("project", action="create", name="one"))["project"]["id"]
    two = (await pair.a("project", action="create", name="two"))["project"]["id"]
    await pair.a("user", action="create_session", session_name="s")  # the current session
    common = {"tags": ["shared"], "category": "c", "importance": 0.5}
    in_one = await _store(pair, "設計メモ project one", "project", project_id=one, **common)
    in_two = await _store(pair, "設計メモ project two", "project", project_id=two, **common)
    others = [
        await _store(pair, "設計メモ user", "user", **common),
        await _store(pair, "設計メモ global", "global", **common),
        await _store(pair, "設計メモ session", "session", **common),
    ]
    await settled(pair.container)
    only_one = {"project_ids": [one]}
    for arguments in (
        {"type": "advanced", "filters": only_one},
        {"type": "advanced", "query": "設計メモ", "filters": only_one, "threshold": 0.0},
        {"type": "semantic", "query": "設計メモ", "filters": only_one, "threshold": 0.0},
        {"type": "tags", "tags": ["shared"], "filters": only_one},
        {"type": "timerange", "start_time": "2000-01-01T00:00:00Z", "filters": only_one},
        {"type": "advanced", "filters": {"project_ids": [one], "domains": ["project", "user"]}},
    ):
        found = await pair.a("search", **arguments)
        assert [m["id"] for m in found["memories"]] == [in_one], arguments
        assert found.get("total", 1) == 1, arguments
    similar = await pair.a("search", type="similar", memory_id=in_two, filters=only_one, threshold=0.0)
    assert [m["id"] for m in similar["memories"]] == [in_one]
    both = await pair.a("search", type="advanced", filters={"project_ids": [one, two]})
    assert sorted(m["id"] for m in both["memories"]) == sorted([in_one, in_two])
    everything = await pair.a("search", type="advanced", filters={"categories": ["c"]})
    assert len(everything["memories"]) == 5 and set(others) <= {m["id"] for m in everything["memories"]}
    clash = await pair.a_err("search", type="advanced", filters={"project_ids": [one], "domains": ["user"]})
    assert clash["error"]["code"] == "invalid_parameter"
