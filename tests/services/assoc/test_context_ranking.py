"""memory(search) ranks a memory by its conversation too: a memory stored right after one that
answers part of the query (same session: a temporal link) goes ahead of an equal match alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import Client

from memhub.cli.container import build_container
from memhub.core.ids import MEM
from memhub.core.models import Principal
from memhub.search import calibration
from memhub.services.assoc import ranking
from memhub.services.assoc.search import DIVERSITY
from memhub.services.dashboard import finder
from tests.conftest import make_settings
from tests.helpers import ok
from tests.pair import backfill_running, settled
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


async def test_a_restatement_of_a_result_shown_above_is_scored_down(tmp_path: Path, backend: Backend) -> None:
    """Diversity (search/diversity.py): each result's score is its context score less
    `DIVERSITY · weight · redundancy`, the redundancy read from the stored vectors of the
    results above it; the first result and memories unlike those above keep their score."""
    container = build_container(make_settings(tmp_path, backend, embedder="hash", toolsets=("assoc",)))
    runtime = container.runtime
    texts = (
        "deploy pipeline runs nightly from the release branch",
        "the deploy pipeline runs nightly from the release branch",
        "pipeline for deploys of the billing service",
        "lunch menu on fridays",
    )
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(container.run_background)
        await backfill_running(container)
        async with Client(container.server) as client:
            ids = [await _store(client, text) for text in texts]
            await settled(container)
            tool = (await ok(client, "search", type="semantic", query="deploy pipeline nightly"))["memories"]
            me = Principal(container.principal.id, default_project="demo", via="dashboard")
            found = await finder.search_all(runtime, me, "deploy pipeline nightly", container.states)
        tasks.cancel_scope.cancel()
    explain = found.explanations["memory"]
    embedding = runtime.embedding
    assert embedding is not None
    base = calibration.baseline(embedding.id, "passage")
    assert base is not None
    with runtime.store.transaction(write=False) as tx:
        vectors = {
            i: np.frombuffer(blob, dtype="<f4")
            for i, blob in tx.get_vectors([MEM.require(i) for i in ids], embedding.id).items()
        }
    shown = [MEM.require(m["id"]) for m in tool]
    assert set(shown[:2]) == {MEM.require(ids[0]), MEM.require(ids[1])}  # the two restatements lead
    scores = [m["score"] for m in tool]
    assert scores == sorted(scores, reverse=True)
    for rank, (item, memory) in enumerate(zip(shown, tool, strict=True)):
        factors = explain.factors[item]
        weight = ranking.score(1.0, memory["importance"], memory["access_count"])
        redundancy = max(
            (float(np.clip((vectors[item] @ vectors[above] - base.median) / (1 - base.median), 0, 1))
             for above in shown[:rank]),
            default=0.0,
        )  # fmt: skip
        assert factors["redundancy"] == pytest.approx(redundancy, abs=1e-5)
        plain = ranking.score(float(factors["in_context"]), memory["importance"], memory["access_count"])
        assert memory["score"] == pytest.approx(plain - DIVERSITY * weight * redundancy, abs=1e-4)
    assert explain.factors[shown[1]]["redundancy"] > 0.5  # the second says what the first says
    assert explain.factors[shown[0]]["redundancy"] == 0.0
    container.close()
