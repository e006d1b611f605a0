"""memory(search) ranks a memory by its conversation too: a memory stored right after one that
answers part of the query (same session: a temporal link) goes ahead of an equal match alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memhub.cli.container import build_container
from tests.conftest import make_settings
from tests.helpers import ok
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


@pytest.fixture
async def alice(tmp_path: Path, backend: Backend) -> AsyncIterator[Client]:
    container = build_container(make_settings(tmp_path, backend, toolsets=("assoc",)))  # BM25 only
    try:
        async with Client(container.server) as client:
            yield client
    finally:
        container.close()


async def _store(client: Client, content: str) -> str:
    stored = await ok(client, "memory", action="store", content=content, domain="user")
    return str(stored["memory"]["id"])


async def _search(client: Client, query: str) -> list[dict[str, Any]]:
    found = await ok(client, "memory", action="search", query=query, threshold=0.0, limit=10)
    return list(found["memories"])


async def test_a_match_beside_the_rest_of_the_answer_ranks_first(alice: Client) -> None:
    await ok(alice, "user", action="create_session", session_name="billing")
    billing = await _store(alice, "deploy checklist for the billing service")
    rollback = await _store(alice, "rollback goes through the blue green switch")
    await ok(alice, "user", action="create_session", session_name="search")
    search = await _store(alice, "deploy checklist for the search service")
    await _store(alice, "lunch was pizza again")
    found = [m["id"] for m in await _search(alice, "deploy checklist and rollback")]
    # billing and search match alike on their own (a tie goes to the newer one): billing's
    # neighbour holds the rest of the query
    assert found.index(billing) < found.index(search)
    assert rollback in found
    scores = {m["id"]: m["score"] for m in await _search(alice, "deploy checklist and rollback")}
    assert all(0.0 <= s <= 1.0 for s in scores.values())


async def test_without_a_session_equal_matches_stay_newest_first(alice: Client) -> None:
    billing = await _store(alice, "deploy checklist for the billing service")
    await _store(alice, "rollback goes through the blue green switch")
    search = await _store(alice, "deploy checklist for the search service")
    found = [m["id"] for m in await _search(alice, "deploy checklist and rollback")]
    assert found.index(search) < found.index(billing)  # no temporal links: nothing is lent
