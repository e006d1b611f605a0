"""The discussion toolset over stdio: a real `memhub serve` subprocess and JSON-RPC framing."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import weakref
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.helpers import MEMHUB, SHARED, check_bad_inputs, counts, error, error_body, ok, stdio_params
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


async def test_discussion_flow_over_stdio(tmp_path: Path, backend: Backend) -> None:
    db = backend.url(tmp_path, "m.db")
    async with Client(stdio_params(db)) as client:
        pid = (await ok(client, "add-project", name="stdio", description="日本語 ok"))["project_id"]
        topic = (await ok(client, "add-topic", project_id=pid, title="設計方針"))["topic_id"]
        log = await ok(client, "add-log", topic_id=topic, content="AI: 提案\nユーザー：了解")
        dec = await ok(client, "add-decision", topic_id=topic, decision="WALを使う", reason="並行読み取り")
        assert (await ok(client, "get-logs", topic_id=topic))["logs"][0]["id"] == log["log_id"]
        assert (await ok(client, "get-decisions", topic_id=topic))["decisions"][0]["id"] == dec["decision_id"]
        assert (await ok(client, "search-topics", project_id=pid, keyword="設計"))["topics"][0]["id"] == topic
        assert (await ok(client, "get-decided-topics", project_id=pid))["topics"][0]["id"] == topic
        assert (await ok(client, "get-undecided-topics", project_id=pid))["topics"] == []
        assert (await ok(client, "get-topics", project_id=pid))["topics"][0]["title"] == "設計方針"
        assert (await ok(client, "get-topic-tree", project_id=pid, topic_id=topic))["tree"]["id"] == topic
        assert (await ok(client, "search-decisions", project_id=pid, keyword="wal"))["decisions"]
        assert (await ok(client, "get-projects"))["projects"][0]["name"] == "stdio"

        before = counts(db)
        assert (await error(client, "add-log", {"topic_id": topic}))["code"] == "INVALID_PARAMETER"
        assert (await error(client, "get-logs", {"topic_id": 424242}))["code"] == "NOT_FOUND"
        assert (await error(client, "add-topic", {"project_id": "x", "title": 1}))[
            "code"
        ] == "INVALID_PARAMETER"
        search = await ok(client, "search-topics", project_id=pid, keyword='NEAR( "設計" OR *')
        assert search["topics"] == []
        assert counts(db) == before


_PENDING: weakref.WeakKeyDictionary[subprocess.Popen[bytes], bytes] = weakref.WeakKeyDictionary()


def _readline(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> bytes:
    """The server's next stdout line, within `timeout`. Reads the pipe itself: `select` on a
    buffered reader misses a line already in its buffer when two replies arrive in one chunk."""
    assert proc.stdout is not None
    fd, pending = proc.stdout.fileno(), _PENDING.get(proc, b"")
    deadline = time.monotonic() + timeout
    while b"\n" not in pending:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, "server did not answer in time"
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        pending += chunk
    line, newline, rest = pending.partition(b"\n")
    _PENDING[proc] = rest
    return line + newline


def _rest(proc: subprocess.Popen[bytes]) -> bytes:
    """What the server wrote after the lines `_readline` returned, to its end."""
    assert proc.stdout is not None
    return _PENDING.pop(proc, b"") + proc.stdout.read()


INIT = (
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
)


def test_stdout_carries_only_json_rpc(tmp_path: Path, backend: Backend) -> None:
    """Logs go to stderr (even at DEBUG): every stdout line is a JSON-RPC message."""
    params = stdio_params(backend.url(tmp_path, "m.db"))
    proc = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**(params.env or {}), "MEMHUB_LOG_LEVEL": "DEBUG"},
    )
    assert proc.stdin is not None
    proc.stdin.write(INIT.encode())
    proc.stdin.flush()
    first = json.loads(_readline(proc))
    assert first["id"] == 1 and "result" in first
    proc.stdin.write(
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get-logs","arguments":{"topic_id":7}}}\n'
    )
    proc.stdin.flush()
    second = json.loads(_readline(proc))
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    assert second["id"] == 2 and second["result"]["isError"] is True
    assert "structuredContent" not in second["result"]  # an error body does not match the outputSchema
    assert json.loads(second["result"]["content"][0]["text"])["error"]["code"] == "NOT_FOUND"
    assert _rest(proc).strip() == b""
    assert proc.stderr is not None and proc.stderr.read()  # the DEBUG logs went to stderr


def test_raw_lone_surrogate_is_a_clear_error(tmp_path: Path, backend: Backend) -> None:
    """JSON may carry \\ud800 escapes (invalid unicode): the tool answers INVALID_PARAMETER (memhub's
    own transport passes the line on, where the SDK's dropped it unanswered), the server keeps
    serving and writes nothing."""
    params = stdio_params(backend.url(tmp_path, "m.db"))
    proc = subprocess.Popen(
        [params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=params.env
    )
    assert proc.stdin is not None
    proc.stdin.write(INIT.encode())
    proc.stdin.write(
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add-project",'
        b'"arguments":{"name":"bad\\ud800name"}}}\n'
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get-projects","arguments":{}}}\n'
    )
    proc.stdin.flush()
    replies: dict[int, dict[str, object]] = {}
    while 3 not in replies:
        reply = json.loads(_readline(proc))
        replies[reply["id"]] = reply
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    failed = replies[2]["result"]
    assert failed["isError"] and "structuredContent" not in failed  # type: ignore[index,operator]
    assert json.loads(failed["content"][0]["text"])["error"]["code"] == "INVALID_PARAMETER"  # type: ignore[index]
    assert replies[3]["result"]["structuredContent"] == {"projects": []}  # type: ignore[index]


def test_cold_start_is_under_a_second(tmp_path: Path, backend: Backend) -> None:
    """spawn -> initialize response, measured; generous bound against a slow CI machine."""
    params = stdio_params(backend.url(tmp_path, "m.db"))
    best = 99.0
    for _ in range(3):
        started = time.perf_counter()
        proc = subprocess.Popen(
            [params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=params.env
        )
        assert proc.stdin and proc.stdout
        proc.stdin.write(INIT.encode())
        proc.stdin.flush()
        assert b'"result"' in _readline(proc)
        best = min(best, time.perf_counter() - started)
        proc.stdin.close()
        proc.wait(timeout=10)
    # The benchmark reports the real figure; this only catches regressions, against the floor
    # measured here and now (the MCP SDK's import: 0.6 s on a quiet machine, 3 s on a busy one).
    floor = min(_sdk_import_seconds(params.command) for _ in range(2))
    assert best < floor + 2.0, (best, floor)


def _sdk_import_seconds(memhub: str) -> float:
    """How long this machine takes to start Python and import the MCP SDK, now."""
    python = Path(memhub).with_name("python")
    started = time.perf_counter()
    subprocess.run([str(python), "-c", "import mcp.server"], check=True)
    return time.perf_counter() - started


@pytest.mark.parametrize(("toolset", "count"), [("discussion", 13), ("assoc", 7), ("decisions", 4)])
def test_seed_conformance(tmp_path: Path, backend: Backend, toolset: str, count: int) -> None:
    script = SHARED / "tools" / "seed_conformance.py"
    if not script.exists():
        pytest.skip("../shared is not beside the checkout")
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            "--toolsets",
            toolset,
            "--",
            MEMHUB,
            "--db",
            str(backend.url(tmp_path, "c.db")),
            "serve",
            "--transport",
            "stdio",
            "--embedder",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout.strip().splitlines()[-1] == f"{count} passed, 0 failed", out.stdout + out.stderr


async def test_two_processes_write_one_file_concurrently(tmp_path: Path, backend: Backend) -> None:
    """Two stdio servers on one database file, writing at once: every write is found."""
    db = backend.url(tmp_path, "shared.db")
    async with Client(stdio_params(db)) as setup:
        pid = (await ok(setup, "add-project", name="shared"))["project_id"]
        topic = (await ok(setup, "add-topic", project_id=pid, title="race"))["topic_id"]

    per_writer = 40

    async def writer(tag: str) -> list[int]:
        async with Client(stdio_params(db)) as client:
            return [
                (await ok(client, "add-log", topic_id=topic, content=f"{tag} {i}"))["log_id"]
                for i in range(per_writer)
            ]

    results: dict[str, list[int]] = {}

    async def run(tag: str) -> None:
        results[tag] = await writer(tag)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "A")
        tg.start_soon(run, "B")

    written = set(results["A"]) | set(results["B"])
    assert len(written) == 2 * per_writer
    async with Client(stdio_params(db)) as reader:
        seen: list[dict[str, object]] = []
        start = None
        while True:
            page = await ok(reader, "get-logs", topic_id=topic, **({"start_id": start} if start else {}))
            seen.extend(page["logs"])
            start = page["next_start_id"]
            if start is None:
                break
    assert {int(str(log["id"])) for log in seen} == written
    assert sorted(str(log["content"]) for log in seen) == sorted(
        [f"A {i}" for i in range(per_writer)] + [f"B {i}" for i in range(per_writer)]
    )
    doctor = subprocess.run([MEMHUB, "--db", str(db), "doctor"], capture_output=True, text=True, timeout=30)
    assert doctor.returncode == 0, doctor.stdout
    assert "audit chain" in doctor.stdout and "ok" in doctor.stdout


async def test_assoc_flow_over_stdio(tmp_path: Path, backend: Backend) -> None:
    params = stdio_params(backend.url(tmp_path, "a.db"))
    params.env = {**(params.env or {}), "MEMHUB_EMBEDDER": "hash"}
    async with Client(params) as client:
        project = (await ok(client, "project", action="create", name="stdio-assoc"))["project"]["id"]
        await ok(client, "user", action="create_session", session_name="s")
        first = await ok(
            client,
            "memory",
            action="store",
            content="データベースはSQLiteのWALモードを使う",
            domain="project",
            project_id=project,
            tags=["db"],
        )
        second = await ok(
            client, "memory", action="store", content="SQLite WAL mode for concurrent readers", domain="user"
        )
        assert any(a["type"] == "temporal" for a in second["associations"])
        related = await ok(client, "memory", action="get_related", memory_id=second["memory"]["id"])
        assert first["memory"]["id"] in [r["memory"]["id"] for r in related["related"]]
        found = await ok(client, "memory", action="search", query="SQLite WAL", threshold=0.0)
        assert {m["id"] for m in found["memories"]} == {first["memory"]["id"], second["memory"]["id"]}
        exported = await ok(client, "memory_manage", action="export", export_format="json")
        assert exported["count"] == 2
        chart = await ok(client, "visualize", type="category_chart", format="svg")
        assert chart["content"].lstrip().startswith("<svg") or "<svg" in chart["content"][:200]
        before = counts(backend.url(tmp_path, "a.db"))
        bad = await client.call_tool("memory", {"action": "store", "content": "x", "domain": "project"})
        assert bad.is_error and error_body(bad)["error"]["code"] == "invalid_parameter"
        assert counts(backend.url(tmp_path, "a.db")) == before


async def test_every_discussion_tool_rejects_bad_input_over_stdio(tmp_path: Path, backend: Backend) -> None:
    db = backend.url(tmp_path, "bad.db")
    async with Client(stdio_params(db)) as client:
        pid = (await ok(client, "add-project", name="bad"))["project_id"]
        topic = (await ok(client, "add-topic", project_id=pid, title="t"))["topic_id"]
        await check_bad_inputs(client, db, pid, topic)
