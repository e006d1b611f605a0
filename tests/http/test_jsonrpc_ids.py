"""Issue 18, item 15: over HTTP a request whose id is not a string or an integer is answered
JSON-RPC -32600 (id null), as the stdio transport answers it, on streamable HTTP and on both
SSE message endpoints; it never runs, and the session keeps serving."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.helpers import counts, http_server
from tests.http import rpc
from tests.store.backends import Backend

BAD_IDS: list[Any] = [{"a": 1}, [1], True, False, 1.5, None]
IDS = ["object", "array", "true", "false", "float", "null"]


def _call(request_id: Any) -> dict[str, Any]:
    arguments = {"name": f"never-{json.dumps(request_id)}"}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "add-project", "arguments": arguments},
    }


def _is_invalid_request(status: int, body: bytes) -> None:
    assert status == 400, (status, body)
    message = json.loads(body)
    assert message["jsonrpc"] == "2.0" and message["id"] is None
    assert message["error"]["code"] == -32600, message


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[tuple[str, str]]:
    db = backend.url(tmp_path_factory.mktemp("ids"), "m.db")
    with http_server(db) as base:
        yield base, db


@pytest.mark.parametrize("request_id", BAD_IDS, ids=IDS)
def test_streamable_http(server: tuple[str, str], request_id: Any) -> None:
    base, db = server
    session = rpc.session(base)
    before = counts(db)
    status, _, body = rpc.post(base, _call(request_id), session)
    _is_invalid_request(status, body)
    assert counts(db) == before
    assert rpc.call(base, session, "get-projects")[0] == 200


@pytest.mark.parametrize("request_id", BAD_IDS, ids=IDS)
def test_sse_message_endpoints(server: tuple[str, str], request_id: Any) -> None:
    base, db = server
    with httpx2.Client(timeout=10) as http, http.stream("GET", f"{base}/sse") as stream:
        lines = stream.iter_lines()
        session_id = next(line for line in lines if line.startswith("data:")).split("session_id=")[1]
        before = counts(db)
        for path in ("/sse", "/messages/"):
            posted = http.post(f"{base}{path}", params={"session_id": session_id}, json=_call(request_id))
            _is_invalid_request(posted.status_code, posted.content)
        assert counts(db) == before
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": rpc.LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        assert http.post(f"{base}/sse", params={"session_id": session_id}, json=init).status_code == 202
        assert any('"serverInfo"' in line for line in lines)
