"""memhub through the official TypeScript SDK client (`Client`), over stdio and streamable HTTP.

The SDK validates every `structuredContent` against the tool's `outputSchema` (from
tools/list) and throws on a mismatch, so each call below must come back as a result, not a
thrown error. One node process per transport runs the whole script (ts/driver.mjs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memhub.mcp import registry
from tests.clients.node import installed, no_node_at_all
from tests.helpers import http_server, stdio_params
from tests.store.backends import Backend

REF_PROJECT = "{{1.structuredContent.project_id}}"
REF_TOPIC = "{{2.structuredContent.topic_id}}"
REF_MEMORY = "{{6.structuredContent.memory.id}}"
MEMORY = "TSクライアントの記憶"

# (call, expected): "ok", or the error (code, a word its message contains).
SCRIPT: list[tuple[dict[str, Any], Any]] = [
    ({"list": True}, "ok"),
    ({"tool": "add-project", "arguments": {"name": "ts-client", "description": "日本語 ok"}}, "ok"),
    ({"tool": "add-topic", "arguments": {"project_id": REF_PROJECT, "title": "設計方針"}}, "ok"),
    (
        {"tool": "get-topics", "arguments": {"project_id": REF_PROJECT, "limit": 50}},
        ("INVALID_PARAMETER", "limit"),
    ),
    ({"tool": "get-logs", "arguments": {"topic_id": 424242}}, ("NOT_FOUND", "424242")),
    ({"tool": "get-topics", "arguments": {"project_id": REF_PROJECT}}, "ok"),
    (
        {
            "tool": "memory",
            "arguments": {"action": "store", "content": MEMORY, "domain": "user", "tags": ["ts"]},
        },
        "ok",
    ),
    ({"tool": "memory", "arguments": {"action": "get", "memory_id": "mem_9999"}}, ("not_found", "mem_9999")),
    ({"tool": "memory", "arguments": {"action": "recall"}}, ("invalid_parameter", "action")),
    ({"tool": "search", "arguments": {"type": "tags", "tags": ["ts"]}}, "ok"),
    ({"tool": "add-log", "arguments": {"topic_id": REF_TOPIC}}, ("INVALID_PARAMETER", "content")),
    ({"tool": "memory", "arguments": {"action": "get", "memory_id": REF_MEMORY}}, "ok"),
]


@pytest.fixture(scope="module")
def driver() -> Path:
    if no_node_at_all():
        pytest.skip("neither node nor npm found: the TypeScript SDK client tests need Node.js 20 or newer")
    assert shutil.which("node"), "npm is installed but node is not"
    return installed("ts") / "driver.mjs"


def _run(driver: Path, target: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run(
        [node, str(driver), *target],
        input=json.dumps([call for call, _ in SCRIPT]),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture(scope="module", params=["stdio", "streamable-http"])
def report(
    request: pytest.FixtureRequest, driver: Path, tmp_path_factory: pytest.TempPathFactory, backend: Backend
) -> Iterator[dict[str, Any]]:
    db = backend.url(tmp_path_factory.mktemp("ts"), "m.db")
    if request.param == "stdio":
        params = stdio_params(db)
        yield _run(driver, ["stdio", params.command, *params.args], params.env)
    else:
        with http_server(db) as base:
            yield _run(driver, ["http", f"{base}/mcp"])


def _results(report: dict[str, Any]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = report["results"]
    assert len(results) == len(SCRIPT)
    thrown = [(SCRIPT[i][0], r["thrown"]) for i, r in enumerate(results) if "thrown" in r]
    assert not thrown, thrown  # e.g. -32602 "Structured content does not match the tool's output schema"
    return [r["ok"] for r in results]


def test_tools_list(report: dict[str, Any]) -> None:
    assert report["server"]["name"] == "memhub"
    tools = _results(report)[0]["tools"]
    names = {t["name"] for t in tools}
    assert len(names) == sum(len(t.tools) for t in registry.REGISTRY)
    assert {"get-topics", "add-decision", "memory", "search", "search_decisions"} <= names
    for tool in tools:
        assert tool["inputSchema"]["type"] == "object", tool["name"]
        assert tool.get("title"), tool["name"]


def test_successful_calls_validate_against_the_output_schema(report: dict[str, Any]) -> None:
    results = _results(report)
    for (call, expected), result in zip(SCRIPT[1:], results[1:], strict=True):
        if expected != "ok":
            continue
        assert result.get("isError") is not True, (call, result)
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"], call
    assert results[5]["structuredContent"]["topics"][0]["title"] == "設計方針"  # discussion
    memory_id = results[6]["structuredContent"]["memory"]["id"]  # assoc
    assert [m["id"] for m in results[9]["structuredContent"]["memories"]] == [memory_id]
    assert results[11]["structuredContent"]["memory"]["content"] == MEMORY


def test_errors_come_back_as_results_with_code_and_message(report: dict[str, Any]) -> None:
    results = _results(report)
    checked = 0
    for (call, expected), result in zip(SCRIPT, results, strict=True):
        if expected == "ok":
            continue
        code, word = expected
        assert result["isError"] is True, call
        assert "structuredContent" not in result, call  # it would not match the outputSchema
        body = json.loads(result["content"][0]["text"])
        assert body["error"]["code"] == code, (call, body)
        assert word in body["error"]["message"], (call, body)
        checked += 1
    assert checked == 5
