"""Raw JSON-RPC lines fuzzed into a real `memhub serve --transport stdio` subprocess.

Lines are valid `tools/call` requests (arguments from each listed tool's schema) and mutations
of them: truncated, invalid UTF-8 bytes or `\\ud800` escapes inserted, arguments nested deeply,
random bytes; plus a fixed corpus (a 10 MB line among them). After each line a `ping` sentinel
follows. Properties: a line that is a request is answered (by id); a line that is not a message is
answered with a JSON-RPC error before the sentinel's reply; everything within LIMIT_S; tool errors
in the toolset's vocabulary; a failing line writes no row; stderr never holds a traceback; the
server exits cleanly at EOF. The count is MEMHUB_FUZZ_LINES (`make fuzz`), else a CI-sized run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from memhub.mcp.stdio import MAX_MESSAGE_DEPTH
from memhub.services.common import json_depth
from tests.fuzz import strategies as gen
from tests.fuzz.test_fuzz_tools import vocabulary
from tests.helpers import counts
from tests.mcp.raw import RawServer
from tests.store.backends import Backend

LIMIT_S = 20.0
BAD_BYTES = [
    b"\xff",
    b"\xfe",
    b"\xc3(",
    b"\xed\xa0\x80",
    b"\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xc0\xaf",
    b"\x00",
]


def lines_to_send(default: int) -> int:
    return int(os.environ.get("MEMHUB_FUZZ_LINES", default))


@dataclass
class Stdio:
    server: RawServer
    db: str
    tools: dict[str, dict[str, Any]]
    sent: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Stdio]:
    db = backend.url(tmp_path_factory.mktemp("fuzz-stdio"), "m.db")
    server = RawServer(db)
    server.send(b'{"jsonrpc":"2.0","id":"list","method":"tools/list"}\n')
    listed = server.reply("list")["result"]["tools"]
    target = Stdio(server, db, {tool["name"]: tool["inputSchema"] for tool in listed})
    yield target
    stderr = server.close()  # EOF: a clean exit
    assert "Traceback" not in stderr, stderr[-3000:]
    print(f"\nstdio fuzz: {target.sent} lines, outcomes {dict(sorted(target.outcomes.items()))}")


def _expectation(line: bytes) -> tuple[str, Any]:
    """("reply", id) for a request, ("error", None) for a line that is not a message, ("none", None)
    for a notification, a response or a blank line."""
    text = line.decode("utf-8", "surrogateescape")
    if not text.strip():
        return "none", None
    try:
        parsed = json.loads(text, parse_constant=_reject)
    except (ValueError, RecursionError):
        return "error", None
    if json_depth(parsed, MAX_MESSAGE_DEPTH) > MAX_MESSAGE_DEPTH:
        return "error", None
    try:
        message = types.jsonrpc_message_adapter.validate_python(parsed, by_name=False)
    except ValidationError:
        return "error", None
    if isinstance(message, types.JSONRPCRequest):
        return "reply", message.id
    return "none", None


def _reject(name: str) -> Any:
    raise ValueError(name)


def exchange(t: Stdio, line: bytes) -> None:
    """Send one line and its sentinel; check the answers."""
    line = line.replace(b"\n", b" ") + b"\n"
    kind, request_id = _expectation(line)
    t.sent += 1
    sentinel = f"sentinel-{t.sent}"
    before = counts(t.db)
    t.server.send(line + b'{"jsonrpc":"2.0","id":"%s","method":"ping"}\n' % sentinel.encode())
    answers: list[dict[str, Any]] = []
    sentinel_seen = reply_seen = False
    while not sentinel_seen or (kind == "reply" and not reply_seen):
        message = t.server.next_message(LIMIT_S)
        if message.get("id") == sentinel:
            assert message.get("result") == {}, message
            sentinel_seen = True
            if kind == "error":
                assert answers, ("a bad line got no error before the next line's reply", line[:300])
            continue
        answers.append(message)
        if kind == "reply" and message.get("id") == request_id:
            reply_seen = True
    failed = False
    for answer in answers:
        text = json.dumps(answer)
        assert "Traceback" not in text, answer
        if "error" in answer:
            failed = True
            assert isinstance(answer["error"].get("code"), int), answer
            t.count(f"jsonrpc {answer['error']['code']}")
        elif isinstance(answer.get("result"), dict) and answer["result"].get("isError"):
            failed = True
            body = answer["result"].get("structuredContent")
            tool = _tool_of(line)
            if body is None or tool not in t.tools:  # an unknown tool: the SDK's own message
                t.count("sdk error")
                continue
            code = body["error"]["code"]
            assert code in vocabulary(tool), answer
            assert "internal error" not in body["error"]["message"], answer
            t.count(code)
        else:
            t.count("ok")
    if kind == "error" or failed:
        assert counts(t.db) == before, line[:300]


def _tool_of(line: bytes) -> str | None:
    try:
        parsed = json.loads(line.decode("utf-8", "surrogateescape"))
        return str(parsed["params"]["name"])
    except (ValueError, RecursionError, KeyError, TypeError):
        return None


def _request(request_id: int, tool: str, arguments: Any) -> bytes:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return json.dumps(body).encode()  # ensure_ascii: a lone surrogate becomes a \ud800 escape


@st.composite
def raw_lines(draw: st.DrawFn, tools: dict[str, dict[str, Any]]) -> bytes:
    request_id = draw(st.integers(1, 2**31))
    tool = draw(st.sampled_from(sorted(tools)))
    schema = tools[tool]
    arguments = draw(gen.object_strategy(schema, schema.get("$defs", {}), tool))
    line = _request(request_id, tool, arguments)
    mutation = draw(
        st.sampled_from(["none", "none", "truncate", "bytes", "surrogate", "deep", "random", "other"])
    )
    if mutation == "truncate":
        line = line[: draw(st.integers(0, len(line) - 1))]
    elif mutation == "bytes":
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.sampled_from(BAD_BYTES)) + line[at:]
    elif mutation == "surrogate":
        at = draw(st.integers(0, len(line)))
        line = (
            line[:at] + draw(st.sampled_from([b"\\ud800", b"\\udfff", b"\\udc80x", b"\\u0000"])) + line[at:]
        )
    elif mutation == "deep":
        depth = draw(st.sampled_from([20, 64, 65, 199, 201, 1000, 50_000]))
        line = _request(request_id, tool, {"x": 1}).replace(b'{"x": 1}', b"[" * depth + b"]" * depth)
    elif mutation == "random":
        line = draw(st.binary(max_size=200))
    elif mutation == "other":
        line = draw(
            st.sampled_from(
                [
                    b'{"jsonrpc":"2.0","id":%d,"method":"tools/list"}' % request_id,
                    b'{"jsonrpc":"2.0","id":%d,"method":"nope"}' % request_id,
                    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{}}' % request_id,
                    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"nope"}}' % request_id,
                    b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}',
                    b'{"jsonrpc":"2.0","id":%d,"result":{}}' % request_id,
                    b'{"jsonrpc":"2.0","id":null,"method":"ping"}',
                    b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
                    b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}',
                    b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
                    b"null",
                    b"",
                ]
            )
        )
    return line


CORPUS = [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add-project","arguments":{"name":"ok\\ud800ok"}}}',
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add-project","arguments":{"name":"\xff\xfe"}}}',
    b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"memory","arguments":{"action":"store",'
    b'"domain":"user","content":"x","metadata":' + b'{"a":' * 197 + b"1" + b"}" * 197 + b"}}}",
    b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add-project","arguments":{"name":"tr',
    b"[" * 100_000,
    b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"add-log","arguments":{"topic_id":1,"content":"'
    + b"z" * 10_000_000
    + b'"}}}',
    b"\xff\xfe\xfd",
    b"{}",
]


@pytest.mark.parametrize("line", CORPUS, ids=[f"corpus{i}" for i in range(len(CORPUS))])
def test_corpus_lines(stdio: Stdio, line: bytes) -> None:
    exchange(stdio, line)


def test_fuzz_raw_lines(stdio: Stdio) -> None:
    @settings(
        max_examples=lines_to_send(150),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(line=raw_lines(stdio.tools))
    def run(line: bytes) -> None:
        exchange(stdio, line)

    run()
