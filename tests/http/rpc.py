"""Raw JSON-RPC over streamable HTTP with urllib: status codes and headers visible to the test."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from email.message import Message
from typing import Any

LATEST_PROTOCOL_VERSION = "2025-06-18"  # a session-based version: plain tools/call bodies

ACCEPT = "application/json, text/event-stream"


def post(
    base: str,
    payload: Any,
    headers: dict[str, str] | None = None,
    path: str = "/mcp",
    data: bytes | None = None,
) -> tuple[int, Message, bytes]:
    body = data if data is not None else json.dumps(payload).encode()
    request = urllib.request.Request(
        base + path,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": ACCEPT, **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def request(base: str, method: str, path: str, headers: dict[str, str]) -> tuple[int, Message, bytes]:
    req = urllib.request.Request(base + path, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=15) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def initialize(base: str, headers: dict[str, str] | None = None) -> tuple[int, Message, bytes]:
    params = {
        "protocolVersion": LATEST_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    return post(base, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, headers)


def session(base: str, headers: dict[str, str] | None = None) -> dict[str, str]:
    """Headers of an initialized MCP session."""
    status, answer, _ = initialize(base, headers)
    assert status == 200, status
    with_session = {
        **(headers or {}),
        "Mcp-Session-Id": answer["mcp-session-id"],
        "Mcp-Protocol-Version": LATEST_PROTOCOL_VERSION,
    }
    status, _, _ = post(base, {"jsonrpc": "2.0", "method": "notifications/initialized"}, with_session)
    assert status == 202, status
    return with_session


def call(base: str, headers: dict[str, str], tool: str, **arguments: Any) -> tuple[int, Message, Any]:
    """(status, headers, JSON-RPC result or None) of one tools/call."""
    payload = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    status, answer, body = post(base, payload, headers)
    if status != 200:
        return status, answer, json.loads(body) if body else None
    text = body.decode()
    data = [line.removeprefix("data:").strip() for line in text.splitlines() if line.startswith("data:")]
    message = json.loads(data[-1] if data else text)
    return status, answer, message.get("result")
