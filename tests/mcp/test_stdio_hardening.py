"""Issue 11, defects 1 and 2: over stdio every line gets an answer, and bytes that are not UTF-8
are an error (never U+FFFD stored as if nothing happened). A real `memhub serve` subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.message import SessionMessage

from memhub.mcp.stdio import MAX_LINE_BYTES, MAX_MESSAGE_DEPTH, _decode, _find_id, _Line
from tests.helpers import counts
from tests.mcp.raw import RawServer, call_line, tool_error
from tests.store.backends import Backend


@pytest.fixture
def server(tmp_path: Path, backend: Backend) -> RawServer:
    return RawServer(backend.url(tmp_path, "m.db"))


def _raw_call(request_id: int, tool: str, raw_arguments: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}\n' % (
        request_id,
        tool.encode(),
        raw_arguments,
    )


def test_lone_surrogate_in_arguments_is_invalid_parameter(
    server: RawServer, tmp_path: Path, backend: Backend
) -> None:
    server.send(_raw_call(2, "add-project", b'{"name":"ok\\ud800ok"}'))
    assert tool_error(server.reply(2))["code"] == "INVALID_PARAMETER"
    server.send(_raw_call(3, "memory", b'{"action":"store","domain":"user","content":"a\\udc00b"}'))
    assert tool_error(server.reply(3))["code"] == "invalid_parameter"
    server.send(
        _raw_call(4, "memory", b'{"action":"store","domain":"user","content":"x","metadata":{"k\\ud800":1}}')
    )
    assert tool_error(server.reply(4))["code"] == "invalid_parameter"
    # a surrogate where no tool validates it (the tool name) is answered too, and the server lives on
    server.send(_raw_call(5, "ok\\ud800", b"{}"))
    reply = server.reply(5)
    assert "error" in reply or reply["result"]["isError"] is True
    assert server.call(6, "get-projects", {})["result"]["structuredContent"] == {"projects": []}
    assert "Traceback" not in server.close()
    assert (
        counts(backend.url(tmp_path, "m.db"))["projects"] == 0
        and counts(backend.url(tmp_path, "m.db"))["items"] == 0
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("add-project", b'{"name":"bad\xff\xfename"}', "INVALID_PARAMETER"),
        ("add-project", b'{"name":"ok","description":"\xc3("}', "INVALID_PARAMETER"),
        ("memory", b'{"action":"store","domain":"user","content":"caf\xe9"}', "invalid_parameter"),
        (
            "memory",
            b'{"action":"store","domain":"user","content":"x","tags":["\xed\xa0\x80"]}',
            "invalid_parameter",
        ),
        ("project", b'{"action":"create","name":"\xf8\x88\x80\x80\x80"}', "invalid_parameter"),
    ],
)
def test_invalid_utf8_is_rejected_not_replaced(
    tmp_path: Path, backend: Backend, tool: str, arguments: bytes, code: str
) -> None:
    server = RawServer(backend.url(tmp_path, "m.db"))
    before = counts(backend.url(tmp_path, "m.db"))
    server.send(_raw_call(2, tool, arguments))
    error = tool_error(server.reply(2))
    assert error["code"] == code and "unicode" in error["message"], error
    assert counts(backend.url(tmp_path, "m.db")) == before
    assert "Traceback" not in server.close()


def test_invalid_utf8_outside_strings_is_a_parse_error(server: RawServer) -> None:
    server.send(b'{"jsonrpc":"2.0","id":2,\xff"method":"ping"}\n')
    reply = server.reply(None)
    assert reply["error"]["code"] == -32700
    assert "result" in server.call(3, "get-projects", {})
    server.close()


def test_deep_nesting_is_answered(server: RawServer, tmp_path: Path, backend: Backend) -> None:
    # deeper than the SDK's parser (~200) but a reasonable message: the tool says what is wrong
    meta = b'{"a":' * 30 + b"1" + b"}" * 30
    server.send(
        _raw_call(2, "memory", b'{"action":"store","domain":"user","content":"x","metadata":' + meta + b"}")
    )
    assert "nested" in tool_error(server.reply(2))["message"]
    for depth, request_id in [(300, 3), (100_000, 4)]:
        deep = b"[" * depth + b"]" * depth
        server.send(_raw_call(request_id, "add-project", b'{"name":' + deep + b"}"))
        reply = server.reply(request_id)
        assert reply["error"]["code"] == -32600 and "nested" in reply["error"]["message"], reply
    # the id after the deep part is found too
    deep = b"[" * 5000 + b"]" * 5000
    server.send(
        b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","arguments":{"a":'
        + deep
        + b'}},"id":"late"}\n'
    )
    assert server.reply("late")["error"]["code"] == -32600
    assert "result" in server.call(9, "get-projects", {})
    assert "Traceback" not in server.close()
    assert counts(backend.url(tmp_path, "m.db"))["items"] == 0


def test_truncated_and_non_jsonrpc_lines_are_answered(server: RawServer) -> None:
    server.send(call_line(2, "get-projects", {})[:-20] + b"\n")  # truncated
    reply = server.reply(None)
    assert reply["error"]["code"] == -32700 and reply["id"] is None
    server.send(b'{"jsonrpc":"2.0","id":3}\n')  # JSON, but not a request
    assert server.reply(3)["error"]["code"] == -32600
    server.send(b'{"jsonrpc":"1.0","id":"four","method":"ping"}\n')
    assert server.reply("four")["error"]["code"] == -32600
    for line in (
        b"[]\n",
        b"42\n",
        b'"x"\n',
        b"{\n",
        b"NaN\n",
        b'{"jsonrpc":"2.0","id":5,"method":"ping","x":NaN}\n',
    ):
        server.send(line)
        reply = server.reply(None)  # not JSON (NaN) or not a message: the id is not trusted
        assert reply["error"]["code"] in (-32700, -32600), (line, reply)
    server.send(b"\n   \n")  # blank lines carry no message: no answer, no harm
    assert "result" in server.call(6, "get-projects", {})
    assert "Traceback" not in server.close()


def test_huge_lines_are_answered_and_bounded(server: RawServer, tmp_path: Path, backend: Backend) -> None:
    # 10 MB of content: a valid request, over the tool's limit
    big = call_line(2, "add-log", {"topic_id": 1, "content": "x" * 10_000_000})
    assert len(big) > 10_000_000
    server.send(big)
    assert tool_error(server.reply(2))["code"] == "INVALID_PARAMETER"
    # over the transport's limit: skipped to its end, answered with the id, memory bounded
    huge = call_line(3, "add-log", {"topic_id": 1, "content": "y" * (MAX_LINE_BYTES + 10)})
    server.send(huge)
    reply = server.reply(3, timeout=60)
    assert reply["error"]["code"] == -32600 and "too large" in reply["error"]["message"]
    assert "result" in server.call(4, "get-projects", {})
    assert "Traceback" not in server.close()
    assert counts(backend.url(tmp_path, "m.db"))["items"] == 0


def test_truncated_line_at_eof_is_answered(tmp_path: Path, backend: Backend) -> None:
    server = RawServer(backend.url(tmp_path, "m.db"))
    server.send(call_line(2, "get-projects", {})[:30])  # no newline, then EOF
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    assert server.reply(None)["error"]["code"] == -32700
    assert server.proc.wait(timeout=20) == 0


# -- the transport's pieces, in process ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"arguments":{"a":[[[', 12),
        ('{"jsonrpc":"2.0","method":"x","params":{"id":99,"arguments":[[[', None),
        ('{"params":{"id":1},"id":"abc\\"d","method":', 'abc"d'),
        ('{"method":"x","params":{"a":"}{\\"id\\":3"}, "id" : -7 ,', -7),
        ('{"id":true,"method":"x"', None),
        ("[[[[", None),
    ],
)
def test_find_id(text: str, expected: object) -> None:
    assert _find_id(text) == expected


def test_find_id_in_the_tail() -> None:
    assert _find_id('{"jsonrpc":"2.0","method":"m","params":{"x":[[[', ',"id":42}\n') == 42
    assert _find_id('{"jsonrpc":"2.0","method":"m","params":{"x":[[[', '"]]]},"id":"z"}') == "z"
    assert _find_id('{"jsonrpc":"2.0","method":"m","params":{"x":[[[', '],"id":42}}') is None


def test_decode_keeps_valid_messages_and_answers_the_rest() -> None:
    def line(data: bytes) -> _Line:
        return _Line(data, len(data))

    good = _decode(line(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'), 100)
    assert good is not None and hasattr(good, "message")
    assert _decode(line(b"  \r\n"), 100) is None
    bad = _decode(line(b'{"jsonrpc":"2.0","id":1,"method":"ping"'), 100)
    assert bad is not None and json.loads(bad.model_dump_json())["error"]["code"] == -32700  # type: ignore[union-attr]


@pytest.mark.parametrize("slow", [False, True])
def test_depth_limit_is_the_same_on_both_parsing_paths(slow: bool) -> None:
    """The fast parser (pydantic) and the fallback (json, taken here because of the "NaN" text)
    draw the line at the same depth, so a line's fate does not depend on which one read it."""
    for depth, accepted in [(MAX_MESSAGE_DEPTH - 1, True), (MAX_MESSAGE_DEPTH, False)]:
        params = b'{"a":' * depth + b"1" + b"}" * depth
        data = b'{"jsonrpc":"2.0","id":1,"method":"x",%s"params":%s}' % (
            b'"p":"NaN",' if slow else b"",
            params,
        )
        decoded = _decode(_Line(data, len(data)), MAX_LINE_BYTES)
        assert isinstance(decoded, SessionMessage) is accepted, (depth, decoded)
        if not accepted:
            assert decoded is not None and decoded.id == 1  # type: ignore[union-attr]
