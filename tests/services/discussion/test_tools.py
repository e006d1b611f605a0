"""Every discussion tool through the real MCP client (in-memory, with and without JSON-RPC framing)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from memhub.cli.container import Container
from tests.helpers import FTS_TRICKS, counts, error, ok

pytestmark = pytest.mark.anyio

TOOLS = {
    "add-project",
    "get-projects",
    "add-topic",
    "add-log",
    "add-decision",
    "get-topics",
    "get-decided-topics",
    "get-undecided-topics",
    "get-topic-tree",
    "get-logs",
    "get-decisions",
    "search-topics",
    "search-decisions",
}


async def _project(client: Client, name: str = "claude-code-exterminal-memory") -> int:
    out = await ok(client, "add-project", name=name, description="MCPサーバーを作るよ〜")
    return int(out["project_id"])


async def test_tool_list_has_schemas_and_annotations(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        assert tool.output_schema is not None
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint == tool.name.startswith(("get-", "search-"))
        assert tool.annotations.destructive_hint is False
    assert tools["add-topic"].input_schema["required"] == ["project_id", "title"]


async def test_projects(client: Client) -> None:
    created = await ok(
        client, "add-project", name="p1", description="説明", asana_url="https://app.asana.com/0/1"
    )
    assert created["project_id"] >= 1
    assert created["asana_url"] == "https://app.asana.com/0/1"
    assert created["created_at"].endswith("Z")
    await ok(client, "add-project", name="p2")
    listed = await ok(client, "get-projects")
    assert [p["name"] for p in listed["projects"]] == ["p2", "p1"]  # newest first
    assert listed["projects"][1] == {
        "id": created["project_id"],
        "name": "p1",
        "description": "説明",
        "asana_url": "https://app.asana.com/0/1",
        "created_at": created["created_at"],
    }
    assert len((await ok(client, "get-projects", limit=1))["projects"]) == 1
    dup = await error(client, "add-project", {"name": "p1"})
    assert dup["code"] == "INVALID_PARAMETER" and "already exists" in dup["message"]


async def test_topics_tree_and_decided_filters(client: Client) -> None:
    pid = await _project(client)
    root = await ok(
        client,
        "add-topic",
        project_id=pid,
        title="開発フローの詳細",
        description="プランモードの使い方、タスク分解の粒度を決定する",
    )
    assert root["parent_topic_id"] is None
    a = await ok(
        client, "add-topic", project_id=pid, title="プランモードの使い方", parent_topic_id=root["topic_id"]
    )
    b = await ok(
        client, "add-topic", project_id=pid, title="MCPツールの詳細設計", parent_topic_id=root["topic_id"]
    )
    c = await ok(client, "add-topic", project_id=pid, title="grandchild", parent_topic_id=a["topic_id"])
    assert a["description"] is None

    top = await ok(client, "get-topics", project_id=pid)
    assert [t["id"] for t in top["topics"]] == [root["topic_id"]]
    kids = await ok(client, "get-topics", project_id=pid, parent_topic_id=root["topic_id"])
    assert [t["id"] for t in kids["topics"]] == [a["topic_id"], b["topic_id"]]

    await ok(client, "add-decision", topic_id=a["topic_id"], decision="使わない", reason="発散させたい")
    decided = await ok(client, "get-decided-topics", project_id=pid, parent_topic_id=root["topic_id"])
    undecided = await ok(client, "get-undecided-topics", project_id=pid, parent_topic_id=root["topic_id"])
    assert [t["id"] for t in decided["topics"]] == [a["topic_id"]]
    assert [t["id"] for t in undecided["topics"]] == [b["topic_id"]]
    assert [t["id"] for t in (await ok(client, "get-undecided-topics", project_id=pid))["topics"]] == [
        root["topic_id"]
    ]
    assert (await ok(client, "get-decided-topics", project_id=pid))["topics"] == []

    tree = await ok(client, "get-topic-tree", project_id=pid, topic_id=root["topic_id"])
    assert tree["truncated"] is False
    node = tree["tree"]
    assert node["title"] == "開発フローの詳細"
    assert [ch["id"] for ch in node["children"]] == [a["topic_id"], b["topic_id"]]
    assert [g["id"] for g in node["children"][0]["children"]] == [c["topic_id"]]
    assert node["children"][1]["children"] == []

    cut = await ok(client, "get-topic-tree", project_id=pid, topic_id=root["topic_id"], limit=2)
    assert cut["truncated"] is True
    assert [ch["id"] for ch in cut["tree"]["children"]] == [a["topic_id"]]


async def test_get_topics_limit_defaults_to_ten(client: Client) -> None:
    pid = await _project(client)
    for i in range(12):
        await ok(client, "add-topic", project_id=pid, title=f"topic {i}")
    assert len((await ok(client, "get-topics", project_id=pid))["topics"]) == 10
    assert len((await ok(client, "get-topics", project_id=pid, limit=3))["topics"]) == 3


async def test_logs_are_chronological_and_page_by_start_id(client: Client) -> None:
    """Pinned order (docs/discussion.md): oldest first; start_id is inclusive; next_start_id pages on."""
    pid = await _project(client)
    topic = (await ok(client, "add-topic", project_id=pid, title="t"))["topic_id"]
    other = (await ok(client, "add-topic", project_id=pid, title="u"))["topic_id"]
    ids = []
    for i in range(35):
        ids.append(
            (await ok(client, "add-log", topic_id=topic, content=f"AI: 提案 {i}\nユーザー：同意"))["log_id"]
        )
        if i == 3:
            await ok(client, "add-log", topic_id=other, content="elsewhere")
    first = await ok(client, "get-logs", topic_id=topic)
    assert [log["id"] for log in first["logs"]] == ids[:30]
    assert first["logs"][0]["content"] == "AI: 提案 0\nユーザー：同意"
    assert first["next_start_id"] == ids[30]
    second = await ok(client, "get-logs", topic_id=topic, start_id=first["next_start_id"])
    assert [log["id"] for log in second["logs"]] == ids[30:]
    assert second["next_start_id"] is None
    small = await ok(client, "get-logs", topic_id=topic, start_id=ids[5], limit=2)
    assert [log["id"] for log in small["logs"]] == ids[5:7]


async def test_decisions_and_search(client: Client) -> None:
    pid = await _project(client)
    topic = (
        await ok(
            client,
            "add-topic",
            project_id=pid,
            title="開発フロー",
            description="Plan Mode usage and TODO分解",
        )
    )["topic_id"]
    d1 = await ok(
        client,
        "add-decision",
        topic_id=topic,
        decision="設計議論フェーズではプランモード不要。",
        reason="設計議論では自由に発散→収束させたい。",
    )
    d2 = await ok(
        client, "add-decision", topic_id=topic, decision="Use SQLite WAL", reason="Concurrent readers"
    )
    listed = await ok(client, "get-decisions", topic_id=topic)
    assert [d["id"] for d in listed["decisions"]] == [d1["decision_id"], d2["decision_id"]]
    assert listed["decisions"][0]["reason"] == "設計議論では自由に発散→収束させたい。"

    for keyword, expected in [
        ("プランモード", [d1["decision_id"]]),
        ("設計", [d1["decision_id"]]),
        ("wal", [d2["decision_id"]]),
        ("sqlite  concurrent", [d2["decision_id"]]),
        ("ＳＱＬｉｔｅ", [d2["decision_id"]]),  # full-width Latin is normalised
        ("nothing-like-this", []),
    ]:
        found = await ok(client, "search-decisions", project_id=pid, keyword=keyword)
        assert [d["id"] for d in found["decisions"]] == expected, keyword
    for keyword in ["plan mode", "TODO分解", "分解", "フロー", "mode"]:
        found = await ok(client, "search-topics", project_id=pid, keyword=keyword)
        assert [t["id"] for t in found["topics"]] == [topic], keyword
    for trick in FTS_TRICKS:
        await ok(client, "search-topics", project_id=pid, keyword=trick)
        await ok(client, "search-decisions", project_id=pid, keyword=trick)


async def test_decision_without_topic_goes_to_current_project(client: Client) -> None:
    out = await ok(client, "add-decision", decision="Adopt ruff", reason="fast")
    assert out["topic_id"] is None
    projects = (await ok(client, "get-projects"))["projects"]
    assert [p["name"] for p in projects] == ["demo"]
    found = await ok(client, "search-decisions", project_id=projects[0]["id"], keyword="ruff")
    assert [d["id"] for d in found["decisions"]] == [out["decision_id"]]


async def test_nothing_can_update_or_delete(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert not any(word in name for name in names for word in ("update", "delete", "remove", "edit"))


def _bad_inputs(pid: int, topic: int) -> list[tuple[str, dict[str, Any], str]]:
    huge = "x" * 70_000
    return [
        ("add-project", {}, "INVALID_PARAMETER"),
        ("add-project", {"name": 5}, "INVALID_PARAMETER"),
        ("add-project", {"name": "   "}, "INVALID_PARAMETER"),
        ("add-project", {"name": "ok", "asana_url": "javascript:alert(1)"}, "INVALID_PARAMETER"),
        ("add-project", {"name": "x" * 201}, "INVALID_PARAMETER"),
        ("add-project", {"name": "bad\ud800unicode"}, "INVALID_PARAMETER"),
        ("add-project", {"name": "nul\x00"}, "INVALID_PARAMETER"),
        ("add-project", {"name": "ok", "unknown": 1}, "INVALID_PARAMETER"),
        ("get-projects", {"limit": 31}, "INVALID_PARAMETER"),
        ("get-projects", {"limit": 0}, "INVALID_PARAMETER"),
        ("get-projects", {"limit": "10"}, "INVALID_PARAMETER"),
        ("add-topic", {"title": "t"}, "INVALID_PARAMETER"),
        ("add-topic", {"project_id": pid}, "INVALID_PARAMETER"),
        ("add-topic", {"project_id": "1", "title": "t"}, "INVALID_PARAMETER"),
        ("add-topic", {"project_id": True, "title": "t"}, "INVALID_PARAMETER"),
        ("add-topic", {"project_id": 10**30, "title": "t"}, "INVALID_PARAMETER"),
        ("add-topic", {"project_id": 99999, "title": "t"}, "NOT_FOUND"),
        ("add-topic", {"project_id": pid, "title": "t", "parent_topic_id": 99999}, "NOT_FOUND"),
        ("add-topic", {"project_id": pid, "title": "t", "description": huge}, "INVALID_PARAMETER"),
        ("add-log", {"topic_id": topic}, "INVALID_PARAMETER"),
        ("add-log", {"topic_id": 99999, "content": "c"}, "NOT_FOUND"),
        ("add-log", {"topic_id": topic, "content": huge}, "INVALID_PARAMETER"),
        ("add-log", {"topic_id": topic, "content": ["list"]}, "INVALID_PARAMETER"),
        ("add-decision", {"decision": "d"}, "INVALID_PARAMETER"),
        ("add-decision", {"reason": "r"}, "INVALID_PARAMETER"),
        ("add-decision", {"topic_id": 99999, "decision": "d", "reason": "r"}, "NOT_FOUND"),
        ("add-decision", {"topic_id": 1.5, "decision": "d", "reason": "r"}, "INVALID_PARAMETER"),
        ("get-topics", {}, "INVALID_PARAMETER"),
        ("get-topics", {"project_id": pid, "limit": 11}, "INVALID_PARAMETER"),
        ("get-topics", {"project_id": 99999}, "NOT_FOUND"),
        ("get-topics", {"project_id": pid, "parent_topic_id": 99999}, "NOT_FOUND"),
        ("get-decided-topics", {"project_id": pid, "limit": 11}, "INVALID_PARAMETER"),
        ("get-decided-topics", {"project_id": 99999}, "NOT_FOUND"),
        ("get-undecided-topics", {"project_id": pid, "limit": -1}, "INVALID_PARAMETER"),
        ("get-undecided-topics", {"project_id": 99999}, "NOT_FOUND"),
        ("get-topic-tree", {"project_id": pid}, "INVALID_PARAMETER"),
        ("get-topic-tree", {"project_id": pid, "topic_id": topic, "limit": 101}, "INVALID_PARAMETER"),
        ("get-topic-tree", {"project_id": pid, "topic_id": 99999}, "NOT_FOUND"),
        ("get-logs", {}, "INVALID_PARAMETER"),
        ("get-logs", {"topic_id": topic, "limit": 31}, "INVALID_PARAMETER"),
        ("get-logs", {"topic_id": topic, "start_id": 0}, "INVALID_PARAMETER"),
        ("get-logs", {"topic_id": 99999}, "NOT_FOUND"),
        ("get-decisions", {"topic_id": topic, "limit": 31}, "INVALID_PARAMETER"),
        ("get-decisions", {"topic_id": "abc"}, "INVALID_PARAMETER"),
        ("get-decisions", {"topic_id": 99999}, "NOT_FOUND"),
        ("search-topics", {"project_id": pid}, "INVALID_PARAMETER"),
        ("search-topics", {"project_id": pid, "keyword": ""}, "INVALID_PARAMETER"),
        ("search-topics", {"project_id": pid, "keyword": "k", "limit": 31}, "INVALID_PARAMETER"),
        ("search-topics", {"project_id": 99999, "keyword": "k"}, "NOT_FOUND"),
        ("search-decisions", {"keyword": "k"}, "INVALID_PARAMETER"),
        ("search-decisions", {"project_id": pid, "keyword": "k" * 501}, "INVALID_PARAMETER"),
        ("search-decisions", {"project_id": 99999, "keyword": "k"}, "NOT_FOUND"),
    ]


async def test_bad_input_is_a_clear_error_and_writes_nothing(client: Client, container: Container) -> None:
    pid = await _project(client)
    topic = (await ok(client, "add-topic", project_id=pid, title="t"))["topic_id"]
    before = counts(container.settings.db_url)
    cases = _bad_inputs(pid, topic)
    assert {tool for tool, _, _ in cases} == TOOLS  # every tool has bad-input cases
    for tool, arguments, code in cases:
        err = await error(client, tool, arguments)
        assert err["code"] == code, (tool, arguments, err)
        assert "Traceback" not in err["message"]
    assert counts(container.settings.db_url) == before


async def test_topic_from_another_project_is_rejected(client: Client) -> None:
    p1 = await _project(client, "one")
    p2 = await _project(client, "two")
    t1 = (await ok(client, "add-topic", project_id=p1, title="t"))["topic_id"]
    err = await error(client, "add-topic", {"project_id": p2, "title": "x", "parent_topic_id": t1})
    assert err["code"] == "INVALID_PARAMETER"
    err = await error(client, "get-topic-tree", {"project_id": p2, "topic_id": t1})
    assert err["code"] == "INVALID_PARAMETER"
