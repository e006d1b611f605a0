"""API keys over real HTTP: 401 without a valid key; each key holder sees only what their domains allow."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import MEMHUB, error, http_server, ok
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


def _key(db: str, name: str, *extra: str) -> str:
    out = subprocess.run(
        [MEMHUB, "--db", str(db), "apikey", "create", name, *extra],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout.strip()


@pytest.fixture(scope="module")
def keyed(
    tmp_path_factory: pytest.TempPathFactory, backend: Backend
) -> Iterator[tuple[str, str, dict[str, str]]]:
    db = backend.url(tmp_path_factory.mktemp("auth"), "m.db")
    keys = {"alice": _key(db, "alice", "--admin"), "bob": _key(db, "bob")}
    with http_server(db, "--auth", "apikey") as base:
        yield base, db, keys


def _as(base: str, key: str) -> Client:
    import httpx2

    http = httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=30)
    return Client(streamable_http_client(f"{base}/mcp", http_client=http))


def test_requests_without_a_valid_key_are_401(keyed: tuple[str, str, dict[str, str]]) -> None:
    base, _, _ = keyed
    for headers in ({}, {"X-API-Key": "mh_wrong"}, {"Authorization": "Bearer nope"}):
        request = urllib.request.Request(f"{base}/mcp", data=b"{}", headers=headers, method="POST")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=5)
        assert caught.value.code == 401
        assert json.loads(caught.value.read())["error"]["code"] == "unauthorized"
    with urllib.request.urlopen(f"{base}/health", timeout=5) as response:  # health stays open
        assert response.status == 200


async def test_each_key_is_its_own_user(keyed: tuple[str, str, dict[str, str]]) -> None:
    base, _, keys = keyed
    async with _as(base, keys["alice"]) as alice, _as(base, keys["bob"]) as bob:
        assert (await ok(alice, "user", action="get_current"))["user_id"] == "alice"
        assert (await ok(bob, "user", action="get_current"))["user_id"] == "bob"
        private = (await ok(alice, "memory", action="store", content="alice only", domain="user"))["memory"][
            "id"
        ]
        shared = (await ok(alice, "memory", action="store", content="for everyone", domain="global"))[
            "memory"
        ]["id"]
        assert (await error(bob, "memory", {"action": "get", "memory_id": private}))["code"] == "not_found"
        assert (await ok(bob, "memory", action="get", memory_id=shared))["memory"]["author_id"] == "alice"
        assert (await error(bob, "admin", {"action": "system_stats"}))["code"] == "permission_denied"
        assert (await ok(alice, "admin", action="system_stats"))["status"] == "ok"


async def test_a_revoked_key_stops_working(keyed: tuple[str, str, dict[str, str]]) -> None:
    base, db, _ = keyed
    carol = _key(db, "carol")
    async with _as(base, carol) as client:
        assert (await ok(client, "user", action="get_current"))["user_id"] == "carol"
    subprocess.run([MEMHUB, "--db", str(db), "apikey", "revoke", "carol"], check=True, capture_output=True)
    request = urllib.request.Request(f"{base}/mcp", data=b"{}", headers={"X-API-Key": carol}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 401
