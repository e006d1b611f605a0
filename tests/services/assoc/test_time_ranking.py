"""memory(search) reads the time a query names ("in June", "last week", 「先週」) and puts the
memories created then ahead of equal matches from other times (search/when.py, the rerank's
time weight); a query naming no time ranks as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memhub.cli.container import Container, build_container
from tests.conftest import make_settings
from tests.helpers import FixedClock, ok
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


@pytest.fixture
async def assoc(tmp_path: Path, backend: Backend) -> AsyncIterator[tuple[Container, Client]]:
    container = build_container(make_settings(tmp_path, backend, toolsets=("assoc",)))  # BM25 only
    try:
        async with Client(container.server) as client:
            yield container, client
    finally:
        container.close()


async def _store_at(container: Container, client: Client, at: datetime, content: str) -> str:
    """Stores `content` with the store's clock at `at` (its created_at)."""
    container.runtime.store.clock = FixedClock(at)  # type: ignore[attr-defined]
    stored = await ok(client, "memory", action="store", content=content, domain="user")
    return str(stored["memory"]["id"])


async def _search(container: Container, client: Client, at: datetime, query: str) -> list[dict[str, Any]]:
    container.runtime.store.clock = FixedClock(at)  # type: ignore[attr-defined]
    found = await ok(client, "memory", action="search", query=query, threshold=0.0, limit=10)
    return list(found["memories"])


async def test_a_dated_query_prefers_the_memory_of_that_date(assoc: tuple[Container, Client]) -> None:
    container, client = assoc
    june = await _store_at(
        container, client, datetime(2025, 6, 12, 9, tzinfo=UTC), "camping trip at the lake, Anna"
    )
    september = await _store_at(
        container, client, datetime(2025, 9, 24, 9, tzinfo=UTC), "camping trip at the lake, Bert"
    )
    other = await _store_at(container, client, datetime(2025, 6, 13, 9, tzinfo=UTC), "dentist appointment")
    now = datetime(2025, 10, 1, 12, tzinfo=UTC)  # a Wednesday

    def ids(found: list[dict[str, Any]]) -> list[str]:
        return [m["id"] for m in found]

    # no time named: equal matches, the newer first
    assert ids(await _search(container, client, now, "camping trip at the lake")) == [september, june]
    # a month, a date, in English or Japanese: the memory of that time first
    for query in (
        "camping trip at the lake in June",
        "camping trip on June 12, 2025",
        "6月のキャンプ camping trip",
    ):
        found = await _search(container, client, now, query)
        assert ids(found)[:2] == [june, september], query
        assert all(0.0 <= m["score"] <= 1.0 for m in found)
    # relative to now: last week is September 22-28
    assert ids(await _search(container, client, now, "camping trip last week"))[:2] == [september, june]
    assert ids(await _search(container, client, now, "先週の camping trip"))[:2] == [september, june]
    # the time alone does not make a memory match: the dentist is not found by "camping"
    assert other not in ids(await _search(container, client, now, "camping trip in June"))


async def test_a_memory_told_a_few_days_later_still_counts(assoc: tuple[Container, Client]) -> None:
    """A memory is often written after what it tells: one created three days after the date
    asked about is still preferred to one from months later."""
    container, client = assoc
    told = await _store_at(container, client, datetime(2025, 5, 6, 9, tzinfo=UTC), "dinner with Maria, Anna")
    later = await _store_at(container, client, datetime(2025, 8, 1, 9, tzinfo=UTC), "dinner with Maria, Bert")
    found = await _search(
        container, client, datetime(2025, 9, 1, tzinfo=UTC), "dinner with Maria on May 3, 2025"
    )
    assert [m["id"] for m in found][:2] == [told, later]
