"""Issue 18, item 4, over real HTTP with API keys: MCP sessions are bounded per principal and in
total (the oldest idle one closes for a new one; busy ones never), every JSON-RPC method is
metered by the rate limits, and a session (streamable HTTP or SSE) serves only the principal
that opened it."""

from __future__ import annotations

import contextlib
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx2

from tests.helpers import MEMHUB, http_server
from tests.http import rpc
from tests.store.backends import Backend

PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


def _keys(db: str | Path, *names: str) -> dict[str, str]:
    def create(name: str, *extra: str) -> str:
        out = subprocess.run(
            [MEMHUB, "--db", str(db), "apikey", "create", name, *extra],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return out.stdout.strip()

    return {name: create(name, *(["--admin"] if name == "alice" else [])) for name in names}


@contextlib.contextmanager
def _server(tmp_path: Path, backend: Backend, **env: str) -> Iterator[tuple[str, dict[str, str]]]:
    db = backend.url(tmp_path, "m.db")
    keys = _keys(db, "alice", "bob", "carol")
    with http_server(db, "--auth", "apikey", env=env) as base:
        yield base, {name: key for name, key in keys.items()}


def _open(base: str, key: str) -> dict[str, str]:
    return rpc.session(base, {"X-API-Key": key})


def _ping(base: str, session: dict[str, str]) -> int:
    return rpc.post(base, PING, session)[0]


def _open_sessions(base: str, alice_key: str) -> float:
    with urllib.request.urlopen(
        urllib.request.Request(f"{base}/metrics", headers={"X-API-Key": alice_key}), timeout=5
    ) as response:
        text = response.read().decode()
    lines = [line for line in text.splitlines() if line.startswith("memhub_http_sessions ")]
    assert lines, text
    return float(lines[0].split()[1])


def test_sessions_are_bounded_per_principal_and_in_total(tmp_path: Path, backend: Backend) -> None:
    env = {"MEMHUB_MAX_SESSIONS_PER_PRINCIPAL": "3", "MEMHUB_MAX_SESSIONS": "5"}
    with _server(tmp_path, backend, **env) as (base, keys):
        alice = [_open(base, keys["alice"]) for _ in range(10)]
        alive = [_ping(base, s) for s in alice]
        assert alive == [404] * 7 + [200] * 3, alive  # the oldest idle ones were closed
        assert _open_sessions(base, keys["alice"]) == 3
        bob = [_open(base, keys["bob"]) for _ in range(3)]  # the 6th session closes alice's oldest
        assert [_ping(base, s) for s in alice[7:]] == [404, 200, 200]
        assert all(_ping(base, s) == 200 for s in bob)
        assert _open_sessions(base, keys["alice"]) == 5
        for _ in range(40):  # an initialize flood without ever finishing the handshake
            assert rpc.initialize(base, {"X-API-Key": keys["carol"]})[0] == 200
        assert _open_sessions(base, keys["alice"]) == 5
        # carol's third session closed the least recently used of the others: bob's first
        assert [_ping(base, s) for s in bob] == [404, 200, 200]


class _Stream:
    """An open GET /sse stream (kept open until `close`) and its session id."""

    def __init__(self, http: httpx2.Client, base: str, key: str) -> None:
        self._context = http.stream("GET", f"{base}/sse", headers={"X-API-Key": key})
        response = self._context.__enter__()
        assert response.status_code == 200, response.status_code
        self._lines = response.iter_lines()  # kept: dropping the iterator would close the stream
        self.session_id = ""
        for line in self._lines:
            if line.startswith("data:"):
                self.session_id = line.split("session_id=")[1].strip()
                break
        assert self.session_id

    def close(self) -> None:
        self._context.__exit__(None, None, None)


def test_open_streams_are_never_closed_for_a_new_session(tmp_path: Path, backend: Backend) -> None:
    with (
        _server(tmp_path, backend, MEMHUB_MAX_SESSIONS_PER_PRINCIPAL="2") as (base, keys),
        httpx2.Client(timeout=10) as http,
    ):
        first, second = _Stream(http, base, keys["bob"]), _Stream(http, base, keys["bob"])
        status, _, body = rpc.initialize(base, {"X-API-Key": keys["bob"]})
        assert status == 503 and b"too_many_sessions" in body
        refused = http.get(f"{base}/sse", headers={"X-API-Key": keys["bob"]})
        assert refused.status_code == 503
        assert rpc.initialize(base, {"X-API-Key": keys["carol"]})[0] == 200  # others are not bound
        first.close()
        deadline = time.monotonic() + 10
        while rpc.initialize(base, {"X-API-Key": keys["bob"]})[0] != 200:
            assert time.monotonic() < deadline, "the closed stream's slot never came back"
            time.sleep(0.05)
        second.close()


def test_a_session_serves_only_the_principal_that_opened_it(tmp_path: Path, backend: Backend) -> None:
    with _server(tmp_path, backend) as (base, keys):
        alice = _open(base, keys["alice"])
        as_bob = {**alice, "X-API-Key": keys["bob"]}
        assert _ping(base, as_bob) == 404  # as if the session did not exist
        assert rpc.call(base, as_bob, "get-projects")[0] == 404
        assert _ping(base, alice) == 200
        with httpx2.Client(timeout=10) as http:
            stream = _Stream(http, base, keys["alice"])
            session_id = stream.session_id
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
            for path in ("/messages/", "/sse"):
                posted = http.post(
                    f"{base}{path}",
                    params={"session_id": session_id},
                    json=init,
                    headers={"X-API-Key": keys["bob"]},
                )
                assert posted.status_code == 404, (path, posted.status_code)
            posted = http.post(
                f"{base}/sse",
                params={"session_id": session_id},
                json=init,
                headers={"X-API-Key": keys["alice"]},
            )
            assert posted.status_code == 202
            stream.close()


def test_every_method_is_metered(tmp_path: Path, backend: Backend) -> None:
    with _server(tmp_path, backend, MEMHUB_RATE_LIMIT_READ="5") as (base, keys):
        session = _open(base, keys["bob"])  # initialize and notifications/initialized: 2 reads
        listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        resource = {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "pce://x/1"}}
        statuses = [rpc.post(base, m, session)[0] for m in (PING, listing, resource, PING)]
        assert statuses == [200, 200, 200, 429], statuses
        status, headers, _ = rpc.post(base, PING, session)
        assert status == 429 and int(headers["retry-after"]) >= 1
        assert _ping(base, _open(base, keys["carol"])) == 200  # another principal's own bucket
    with _server(tmp_path / "ip", backend, MEMHUB_RATE_LIMIT_IP_READ="4") as (base, keys):
        session = _open(base, keys["bob"])
        statuses = [_ping(base, session) for _ in range(3)]
        assert statuses == [200, 200, 429], statuses
        assert rpc.initialize(base, {"X-API-Key": keys["carol"]})[0] == 429  # the same client IP
