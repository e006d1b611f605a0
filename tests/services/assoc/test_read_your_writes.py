"""Reads that depend on vectors or semantic links see this process's writes at once."""

from __future__ import annotations

import logging

import pytest

from tests.pair import Pair

pytestmark = pytest.mark.anyio

TEXT_A = "SQLite WAL mode lets readers and writers work concurrently"
TEXT_B = "SQLite WAL mode readers writers concurrently"


async def test_get_related_and_similar_right_after_storing(pair: Pair) -> None:
    a = (await pair.a("memory", action="store", content=TEXT_A, domain="user"))["memory"]["id"]
    b = (await pair.a("memory", action="store", content=TEXT_B, domain="user"))["memory"]["id"]
    # no wait here: the reads themselves wait (bounded) for this process's pending vectors and links
    related = await pair.a("memory", action="get_related", memory_id=b, depth=1)
    assert [(r["memory"]["id"], r["via"]) for r in related["related"]] == [(a, "semantic")]
    assert "note" not in related
    similar = await pair.a("search", type="similar", memory_id=b, threshold=0.0)
    assert a in [m["id"] for m in similar["memories"]]


async def test_deleting_a_memory_while_it_is_embedded_is_quiet(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    for i in range(20):
        made = await pair.a("memory", action="store", content=f"short lived note {i}", domain="user")
        await pair.a("memory", action="delete", memory_id=made["memory"]["id"])  # races the backfill
    kept = await pair.a("memory", action="store", content="the one that stays", domain="user")
    await pair.a("search", type="similar", memory_id=kept["memory"]["id"], threshold=0.0)
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not noisy, [r.getMessage() for r in noisy]
    assert (await pair.counts())["vectors"] == 1
