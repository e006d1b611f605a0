"""Issue 11, defect 2 over streamable HTTP: a body that is not UTF-8 (or carries a lone surrogate
escape, or nests too deeply, or breaks off) is a clear JSON-RPC parse error, HTTP 400, never a
success; nothing is written and the session keeps serving."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import counts, http_server
from tests.store.backends import Backend

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
)


def _post(url: str, body: bytes, session: str | None = None) -> tuple[int, dict[str, str], bytes]:
    headers = dict(HEADERS)
    if session:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _call(request_id: int, raw_arguments: bytes, tool: bytes = b"add-project") -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":%s}}' % (
        request_id,
        tool,
        raw_arguments,
    )


def _sse_json(body: bytes) -> dict[str, Any]:
    for line in body.decode().splitlines():
        if line.startswith("data: "):
            message: dict[str, Any] = json.loads(line[6:])
            return message
    return dict(json.loads(body))


@pytest.mark.parametrize(
    "body",
    [
        _call(2, b'{"name":"bad\xff\xfename"}'),
        _call(3, b'{"name":"bad\\ud800name"}'),
        _call(
            4,
            b'{"action":"store","domain":"user","content":"x","metadata":'
            + b'{"a":' * 300
            + b"1"
            + b"}" * 300
            + b"}",
            b"memory",
        ),
        _call(5, b'{"name":"trunc'),
    ],
    ids=["invalid-utf8", "lone-surrogate", "deep", "truncated"],
)
def test_bad_bodies_are_parse_errors(tmp_path: Path, backend: Backend, body: bytes) -> None:
    db = backend.url(tmp_path, "m.db")
    with http_server(db) as base:
        url = f"{base}/mcp"
        status, headers, _ = _post(url, INIT)
        session = headers.get("mcp-session-id")
        assert status == 200 and session
        _post(url, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', session)
        before = counts(db)
        status, _, answer = _post(url, body, session)
        assert status == 400, answer
        message = json.loads(answer)
        assert message["error"]["code"] == -32700 and message["error"]["message"].startswith("Parse error")
        assert b"Traceback" not in answer
        assert counts(db) == before
        status, _, answer = _post(url, _call(9, b"{}", b"get-projects"), session)
        assert status == 200 and _sse_json(answer)["result"]["structuredContent"] == {"projects": []}
