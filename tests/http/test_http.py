"""Streamable HTTP, SSE and /health on 127.0.0.1 against a real `memhub serve` process."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, ClientSession
from mcp.client.sse import sse_client

from tests.helpers import MEMHUB, check_bad_inputs, counts, error, error_body, http_server, ok
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[tuple[str, str]]:
    db = backend.url(tmp_path_factory.mktemp("http"), "m.db")
    with http_server(db) as base:
        yield base, db


def test_health_is_json(server: tuple[str, Path]) -> None:
    base, _ = server
    import urllib.request

    with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
        assert response.headers["content-type"].startswith("application/json")
        body = json.loads(response.read())
    assert body["status"] == "ok" and body["version"]


async def test_discussion_over_streamable_http(server: tuple[str, Path]) -> None:
    base, db = server
    async with Client(f"{base}/mcp") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert len(names) == 40  # discussion 13, assoc 7, vault 10, decisions 4, pce 6: the seeds' 40
        pid = (await ok(client, "add-project", name="over-http"))["project_id"]
        topic = (await ok(client, "add-topic", project_id=pid, title="HTTP経由の設計"))["topic_id"]
        await ok(client, "add-log", topic_id=topic, content="AI: hello")
        await ok(client, "add-decision", topic_id=topic, decision="ship it", reason="green")
        assert (await ok(client, "search-topics", project_id=pid, keyword="設計"))["topics"]
        assert (await ok(client, "get-decided-topics", project_id=pid))["topics"][0]["id"] == topic
        before = counts(db)
        assert (await error(client, "get-topics", {"project_id": pid, "limit": 99}))[
            "code"
        ] == "INVALID_PARAMETER"
        assert (await error(client, "add-log", {"topic_id": 10**6, "content": "x"}))["code"] == "NOT_FOUND"
        assert (await error(client, "add-topic", {"project_id": pid}))["code"] == "INVALID_PARAMETER"
        await ok(client, "search-decisions", project_id=pid, keyword='"* OR NEAR(')
        assert counts(db) == before


async def test_discussion_over_sse(server: tuple[str, Path]) -> None:
    base, _ = server
    async with sse_client(f"{base}/sse") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = {t.name for t in (await session.list_tools()).tools}
        assert "get-topic-tree" in names
        pid = (await ok(session, "add-project", name="over-sse"))["project_id"]
        topic = (await ok(session, "add-topic", project_id=pid, title="SSE"))["topic_id"]
        tree = await ok(session, "get-topic-tree", project_id=pid, topic_id=topic)
        assert tree["tree"]["children"] == []
        assert (await error(session, "get-logs", {"topic_id": "nope"}))["code"] == "INVALID_PARAMETER"


def test_refuses_remote_bind_without_auth(tmp_path: Path, backend: Backend) -> None:
    out = subprocess.run(
        [
            MEMHUB,
            "--db",
            str(backend.url(tmp_path, "x.db")),
            "serve",
            "--transport",
            "http",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2 and "loopback" in out.stderr


async def test_metrics_count_calls_and_latency(server: tuple[str, Path]) -> None:
    import urllib.request

    base, _ = server
    async with Client(f"{base}/mcp") as client:
        await ok(client, "get-projects")
        await error(client, "get-logs", {"topic_id": 10**6})
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
        assert response.headers["content-type"].startswith("text/plain")
        text = response.read().decode()
    lines = text.splitlines()
    assert any(
        line.startswith('memhub_tool_calls_total{tool="get-projects",outcome="ok"} ') for line in lines
    )
    assert any(
        line.startswith('memhub_tool_calls_total{tool="get-logs",outcome="NOT_FOUND"} ') for line in lines
    )
    assert any(
        line.startswith('memhub_tool_call_seconds_bucket{tool="get-projects",le="+Inf"}') for line in lines
    )
    assert any(line.startswith("memhub_store_bytes ") and float(line.split()[1]) > 0 for line in lines)
    for line in lines:  # every sample line is "name{labels} number"
        if line and not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])


async def test_assoc_over_streamable_http(server: tuple[str, Path]) -> None:
    base, _ = server
    async with Client(f"{base}/mcp") as client:
        stored = await ok(
            client, "memory", action="store", content="HTTPで保存した記憶", domain="user", tags=["http"]
        )
        memory_id = stored["memory"]["id"]
        found = await ok(client, "search", type="tags", tags=["http"])
        assert [m["id"] for m in found["memories"]] == [memory_id]
        assert (await ok(client, "admin", action="health_check"))["details"]["database"] == "ok"
        err = await client.call_tool("memory", {"action": "get", "memory_id": "mem_0"})
        assert err.is_error and error_body(err)["error"]["code"] == "invalid_parameter"


async def test_every_discussion_tool_rejects_bad_input_over_http(server: tuple[str, Path]) -> None:
    base, db = server
    async with Client(f"{base}/mcp") as client:
        pid = (await ok(client, "add-project", name="bad-over-http"))["project_id"]
        topic = (await ok(client, "add-topic", project_id=pid, title="t"))["topic_id"]
        await check_bad_inputs(client, db, pid, topic)
