"""Issue 18, item 9 (its HTTP half): store-wide counts are for admins. `/metrics` (every tool
call of everyone, the store's size) answers a member 403; `admin(health_check)` tells a member
the server's state without the store-wide counts. Over real HTTP with two API keys."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.helpers import http_server
from tests.http import rpc
from tests.http.test_sessions import _keys
from tests.store.backends import Backend

STORE_WIDE = ("vectors_indexed", "embedder_queue", "vectors_pending", "index_rate")  # services/ops.py


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, backend: Backend
) -> Iterator[tuple[str, dict[str, str]]]:
    db = backend.url(tmp_path_factory.mktemp("counts"), "m.db")
    keys = _keys(db, "alice", "bob")  # alice is an admin, bob a member
    with http_server(db, "--auth", "apikey", "--embedder", "hash") as base:
        yield base, keys


def test_metrics_are_for_admins(server: tuple[str, dict[str, str]]) -> None:
    base, keys = server
    status, _, body = rpc.request(base, "GET", "/metrics", {"X-API-Key": keys["bob"]})
    assert status == 403 and json.loads(body)["error"]["code"] == "forbidden"
    assert b"memhub_" not in body
    status, _, body = rpc.request(base, "GET", "/metrics", {"X-API-Key": keys["alice"]})
    assert status == 200 and b"memhub_tool_calls_total" in body


def test_health_check_counts_are_for_admins(server: tuple[str, dict[str, str]]) -> None:
    base, keys = server
    answers = {}
    for name in ("alice", "bob"):
        session = rpc.session(base, {"X-API-Key": keys[name]})
        status, _, result = rpc.call(base, session, "admin", action="health_check")
        assert status == 200 and not result.get("isError"), result
        answers[name] = result["structuredContent"]
    assert answers["bob"]["status"] == answers["alice"]["status"]
    assert answers["bob"]["details"]["database"] == "ok"
    assert set(STORE_WIDE) <= set(answers["alice"]["details"])  # the admin sees the counts
    assert not set(STORE_WIDE) & set(answers["bob"]["details"]), answers["bob"]
