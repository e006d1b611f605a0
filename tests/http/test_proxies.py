"""Issue 18, item 3: `X-Forwarded-For` is believed only from the proxies `trusted_proxies` names.

Over real HTTP on 127.0.0.1: by default a client rotating the header stays one client (its
per-IP limit holds, its failed logins are audited under the socket address); with the
loopback proxy trusted, the header is honoured."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.helpers import http_server
from tests.http import rpc
from tests.store.backends import Backend, rows

FORGED = [f"203.0.113.{i}" for i in range(1, 9)]


def _failed_logins(base: str) -> list[int]:
    return [
        rpc.initialize(base, {"X-API-Key": f"mh_guess{i}", "X-Forwarded-For": ip})[0]
        for i, ip in enumerate(FORGED)
    ]


def _audited_clients(db: str, expected: int, deadline_s: float = 10.0) -> list[str]:
    """The client addresses of the `unauthorized` audit events, once `expected` are flushed
    (the server is up, so its store exists)."""
    end = time.monotonic() + deadline_s
    while True:
        found = rows(db, "SELECT detail FROM events WHERE tool = 'http.auth' AND outcome = 'unauthorized'")
        clients = [json.loads(row[0])["client"] for row in found]
        if len(clients) >= expected or time.monotonic() > end:
            return clients
        time.sleep(0.05)


def test_a_forged_forwarded_for_is_not_believed(tmp_path: Path, backend: Backend) -> None:
    db = backend.url(tmp_path, "m.db")
    env = {"MEMHUB_RATE_LIMIT_IP_READ": "3"}
    with http_server(db, "--auth", "apikey", env=env) as base:
        statuses = _failed_logins(base)
        assert statuses == [401, 401, 401] + [429] * (len(FORGED) - 3), statuses
        clients = _audited_clients(db, 3)
    assert clients == ["127.0.0.1"] * 3, clients


def test_a_trusted_proxy_is_believed(tmp_path: Path, backend: Backend) -> None:
    db = backend.url(tmp_path, "m.db")
    env = {"MEMHUB_RATE_LIMIT_IP_READ": "3", "MEMHUB_TRUSTED_PROXIES": "127.0.0.1"}
    with http_server(db, "--auth", "apikey", env=env) as base:
        statuses = _failed_logins(base)
        assert statuses == [401] * len(FORGED), statuses  # each forwarded client has its own bucket
        clients = _audited_clients(db, len(FORGED))
    assert sorted(clients) == sorted(FORGED), clients


def test_the_trusted_proxies_flag(tmp_path: Path, backend: Backend) -> None:
    db = backend.url(tmp_path, "m.db")
    with http_server(db, "--auth", "apikey", "--trusted-proxies", "127.0.0.0/8") as base:
        assert rpc.initialize(base, {"X-API-Key": "mh_nope", "X-Forwarded-For": "198.51.100.7"})[0] == 401
        clients = _audited_clients(db, 1)
    assert clients == ["198.51.100.7"], clients
