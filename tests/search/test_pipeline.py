"""The one retrieval pipeline (`SearchEngine.run`): one read snapshot per search, the rerank
inside it, the query parsed once, and the named normalisers of search/fusion.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
from tests.search.conftest import AddItem

from memhub.core.models import Viewer
from memhub.search import EmbeddingService, HashingEmbedder, SearchEngine, VectorBackfill, VectorIndex
from memhub.search.fusion import anchored, by_best, normalised, normalize_scores
from memhub.search.pipeline import Candidates
from memhub.store.base import ItemQuery, Store, Tx

pytestmark = pytest.mark.anyio


def test_named_normalisers() -> None:
    assert by_best([4.0, 2.0, -1.0]) == [1.0, 0.5, 0.0]  # a weak match keeps a share
    assert by_best([]) == [] and by_best([0.0]) == [0.0]
    assert (
        normalised([(1, 4.0), (2, 2.0)], "min_max")
        == {1: 1.0, 2: 0.0}
        == dict(zip([1, 2], normalize_scores([4.0, 2.0]), strict=True))
    )
    assert normalised([(1, 4.0), (2, 2.0)], "by_best") == {1: 1.0, 2: 0.5}
    assert anchored(0.8, 0.6, 1.0) == pytest.approx(0.5)
    assert anchored(0.5, 0.6, 1.0) == 0.0 and anchored(1.2, 0.6, 1.0) == 1.0
    assert anchored(0.7, 0.7, 0.7) == 1.0 and anchored(0.7, 0.7, 0.7, flat=0.0) == 0.0


async def _indexed_engine(store: Store) -> tuple[SearchEngine, VectorIndex]:
    """An engine on the hashing embedder whose every item has its vector."""
    service = EmbeddingService(HashingEmbedder())
    index = VectorIndex(store, service.id, service.dim)
    engine, backfill = SearchEngine(store, service, index), VectorBackfill(store, service, index)
    await service.load()
    while await backfill.run_once():
        pass
    return engine, index


async def test_a_search_reads_one_snapshot_and_reranks_in_it(
    store: Store, add_item: AddItem, alice: Viewer, bob: Viewer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Viewer, keyword side, vector side (its visibility checks) and the rerank share one read
    snapshot: one transaction, and a second one of the same snapshot (`Store.read_pair`) in
    which the vector side finishes beside the keyword side; before the pipeline a hybrid search
    opened four to six."""
    mine = add_item("we deploy everything with kubernetes", title="deployment")
    add_item("kubernetes notes of bob", owner="bob", scope="user")
    add_item("the lunch menu for friday")
    engine, index = await _indexed_engine(store)
    index.refresh()

    opened: list[bool] = []
    feed_reads: list[int] = []
    transaction, vector_changes = store.transaction, store.vector_changes

    depth = [0]

    @contextmanager
    def counted(*, write: bool) -> Iterator[Tx]:
        if depth[0] == 0:  # a read inside the search's read joins its snapshot (store.transaction)
            opened.append(write)
        depth[0] += 1
        try:
            with transaction(write=write) as tx:
                yield tx
        finally:
            depth[0] -= 1

    read_pair = store.read_pair
    paired: list[tuple[Tx, Tx | None]] = []
    checked_in: list[Tx] = []  # where the vector side's visibility checks ran

    @contextmanager
    def counted_pair() -> Iterator[tuple[Tx, Tx | None]]:
        opened.append(False)
        depth[0] += 1
        try:
            with read_pair() as (tx, second):
                if second is not None:
                    visible_ids = second.visible_ids
                    checked = lambda *args: (checked_in.append(second), visible_ids(*args))[1]  # noqa: E731
                    monkeypatch.setattr(second, "visible_ids", checked)
                paired.append((tx, second))
                yield tx, second
        finally:
            depth[0] -= 1

    def feed(embedder: str, after_seq: int, limit: int | None = None) -> Any:
        feed_reads.append(len(opened))
        return vector_changes(embedder, after_seq, limit)

    monkeypatch.setattr(store, "transaction", counted)
    monkeypatch.setattr(store, "read_pair", counted_pair)
    monkeypatch.setattr(store, "vector_changes", feed)
    seen: list[Tx] = []

    def viewer(tx: Tx) -> Viewer:
        seen.append(tx)
        return alice

    def rerank(tx: Tx, found: Candidates) -> list[str]:
        assert tx is seen[0]  # the same transaction the viewer was built in
        assert found.viewer == alice and found.embedder == index.embedder_id
        assert found.terms == ("kubernetes",)
        rows = tx.query_items(found.viewer, ItemQuery(ids=found.ids, limit=10))
        return [row.body for row in rows]

    bodies = await engine.run("kubernetes", viewer, rerank, k_final=5)
    assert "we deploy everything with kubernetes" in bodies
    assert "kubernetes notes of bob" not in bodies  # bob's own memory stays his
    # the vector feed's read is its own on a backend whose feed opens a transaction (PostgreSQL)
    feed_transactions = (len(opened) - 1) if feed_reads else 0
    assert opened.count(False) - feed_transactions == 1 and not any(opened)
    # the vector side's visibility in the snapshot's second reader, beside the keyword side
    [(tx, second)] = paired
    assert tx is seen[0] and second is not None and checked_in == [second]
    hits = await engine.search(bob, "kubernetes", k_final=5)
    assert mine in {h.item_id for h in hits} and len(hits) == len(bodies) + 1


async def test_more_searches_at_once_than_the_default_thread_limiter_holds(
    store: Store, add_item: AddItem, alice: Viewer
) -> None:
    """Each search's snapshot thread waits for its vector side, whose index arithmetic runs on
    a thread too: with 50 searches at once (the query's embedding cached, so nothing times
    out) those must not wait for tokens of anyio's default limiter (40) that the snapshot
    threads hold."""
    for i in range(20):
        add_item(f"note {i} about deploying the service")
    engine, _ = await _indexed_engine(store)
    await engine.search(alice, "deploying the service")  # its embedding is cached from here on
    results: list[int] = []

    async def one() -> None:
        results.append(len(await engine.search(alice, "deploying the service", k_final=5)))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(one)
    assert results == [5] * 50
