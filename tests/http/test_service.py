"""memhub as a shared service, over real HTTP on 127.0.0.1: rate limits with headers, CORS,
allowed Hosts, the body limit, separate HTTP/SSE ports from a config file, POST /sse,
SSE heartbeats and connection limit."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.sse import sse_client

from tests.helpers import counts, free_port, http_server, ok
from tests.http import rpc
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio
LAN = {"Host": "memhub.lan:8000"}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[tuple[str, str]]:
    db = backend.url(tmp_path_factory.mktemp("limits"), "m.db")
    env = {
        "MEMHUB_RATE_LIMIT_IP_READ": "100",
        "MEMHUB_RATE_LIMIT_IP_WRITE": "2",
        "MEMHUB_MAX_BODY_BYTES": "20000",
        "MEMHUB_ALLOWED_ORIGINS": "http://localhost:3000",
    }
    with http_server(db, env=env) as base:
        yield base, db


def test_write_limit_per_ip_is_429_with_headers_and_runs_nothing(limited: tuple[str, Path]) -> None:
    base, db = limited
    session = rpc.session(base)
    statuses = []
    for name in ("one", "two"):
        status, headers, _ = rpc.call(base, session, "add-project", name=name)
        statuses.append(status)
        assert headers["x-ratelimit-limit"] == "2" and headers["x-ratelimit-reset"].isdigit()
    assert statuses == [200, 200]
    before = counts(db)
    status, headers, body = rpc.call(base, session, "add-project", name="three")
    assert status == 429
    assert int(headers["retry-after"]) >= 1
    assert headers["x-ratelimit-limit"] == "2" and headers["x-ratelimit-remaining"] == "0"
    assert body["error"]["code"] == "rate_limited"
    assert counts(db) == before  # nothing executed
    status, headers, _ = rpc.call(base, session, "get-projects")  # reads are another class
    assert status == 200 and headers["x-ratelimit-limit"] == "100"
    assert int(headers["x-ratelimit-remaining"]) > 90


def test_cors_preflight_and_origin(limited: tuple[str, Path]) -> None:
    base, _ = limited
    asked = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
    status, headers, _ = rpc.request(base, "OPTIONS", "/mcp", asked)
    assert status == 204
    assert headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "POST" in headers["access-control-allow-methods"]
    assert "X-API-Key" in headers["access-control-allow-headers"]
    refused = {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}
    assert rpc.request(base, "OPTIONS", "/mcp", refused)[0] == 403
    status, headers, _ = rpc.initialize(base, {"Origin": "http://localhost:3000"})
    assert status == 200 and headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "X-RateLimit-Remaining" in headers["access-control-expose-headers"]
    assert rpc.initialize(base, {"Origin": "http://evil.example"})[0] == 403


def test_oversized_body_is_413_and_the_server_stays_up(limited: tuple[str, Path]) -> None:
    base, _ = limited
    session = rpc.session(base)
    status, _, body = rpc.call(base, session, "add-log", topic_id=1, content="x" * 30000)
    assert status == 413 and body["error"]["code"] == "payload_too_large"
    assert rpc.call(base, session, "get-projects")[0] == 200


def test_a_lan_host_needs_configuring(limited: tuple[str, Path], tmp_path: Path, backend: Backend) -> None:
    base, _ = limited
    assert rpc.initialize(base, LAN)[0] == 421  # not configured: refused
    with http_server(backend.url(tmp_path, "lan.db"), "--allowed-hosts", "memhub.lan:*") as lan:
        assert rpc.initialize(lan, LAN)[0] == 200
        assert rpc.initialize(lan, {"Host": "other.lan:8000"})[0] == 421


async def test_separate_ports_from_a_config_file(tmp_path: Path, backend: Backend) -> None:
    http_port, sse_port = free_port(), free_port()
    config = {
        "transports": {
            "stdio": {"enabled": False},
            "http": {"enabled": True, "port": 1, "host": "127.0.0.1"},
            "sse": {"enabled": True, "port": sse_port, "max_connections": 1, "heartbeat_interval": 0.2},
        },
        "authentication": {"http": {"type": "none"}},
    }
    path = tmp_path / "memhub.json"
    path.write_text(json.dumps(config))
    # the flag wins over the file's http port; the file gives the SSE port and its options
    with http_server(
        backend.url(tmp_path, "m.db"), "--config", str(path), "--http-port", str(http_port), port=http_port
    ) as base:
        sse_base = f"http://127.0.0.1:{sse_port}"
        async with Client(f"{base}/mcp") as client:
            await ok(client, "add-project", name="on-the-http-port")
        assert rpc.request(base, "GET", "/sse", {})[0] == 404
        assert rpc.initialize(sse_base)[0] == 404  # no /mcp on the SSE port
        async with sse_client(f"{sse_base}/sse") as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert (await ok(session, "get-projects"))["projects"][0]["name"] == "on-the-http-port"
            # max_connections 1: a second stream is refused while this one is open
            assert rpc.request(sse_base, "GET", "/sse", {"Accept": "text/event-stream"})[0] == 503
        _post_sse_and_heartbeat(sse_base)


def _post_sse_and_heartbeat(sse_base: str) -> None:
    """`POST /sse?session_id=…` carries messages (seed 003); heartbeats arrive between them."""
    lines: list[str] = []
    seen_heartbeat = threading.Event()
    with httpx2.Client(timeout=10) as http, http.stream("GET", f"{sse_base}/sse") as stream:
        events = stream.iter_lines()
        for line in events:
            if line.startswith("data:"):
                endpoint = line.removeprefix("data:").strip()
                break
        session_id = endpoint.split("session_id=")[1]
        params = {
            "protocolVersion": rpc.LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        posted = http.post(f"{sse_base}/sse", params={"session_id": session_id}, json=message)
        assert posted.status_code == 202
        for line in events:
            lines.append(line)
            if line.startswith(": heartbeat"):
                seen_heartbeat.set()
            if seen_heartbeat.is_set() and any('"serverInfo"' in seen for seen in lines):
                break
            if len(lines) > 200:
                break
    assert seen_heartbeat.is_set(), lines
    assert any('"serverInfo"' in line for line in lines)


def test_a_principal_limit_is_429_over_http_before_the_call_runs(tmp_path: Path, backend: Backend) -> None:
    db = backend.url(tmp_path, "m.db")
    with http_server(db, env={"MEMHUB_RATE_LIMIT_WRITE": "1"}) as base:
        session = rpc.session(base)
        status, headers, _ = rpc.call(base, session, "add-project", name="first")
        assert status == 200 and headers["x-ratelimit-limit"] == "1"
        before = counts(db)
        status, headers, body = rpc.call(base, session, "add-project", name="second")
        assert status == 429 and int(headers["retry-after"]) >= 1 and body["error"]["code"] == "rate_limited"
        assert counts(db) == before


def test_guessing_keys_is_rate_limited(tmp_path: Path, backend: Backend) -> None:
    with http_server(
        backend.url(tmp_path, "m.db"), "--auth", "apikey", env={"MEMHUB_RATE_LIMIT_IP_READ": "2"}
    ) as base:
        statuses = [rpc.initialize(base, {"X-API-Key": f"mh_guess{i}"})[0] for i in range(3)]
        assert statuses == [401, 401, 429]
