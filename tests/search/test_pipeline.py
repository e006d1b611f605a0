"""The one retrieval pipeline (`SearchEngine.run`): one read snapshot per search, the rerank
inside it, the query parsed once, and the named normalisers of search/fusion.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import anyio
import pytest
from tests.search.conftest import NOW, AddItem

from memhub.core.errors import ErrorKind, MemhubError
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

    opened: list[bool] = []  # transactions that begin a snapshot, on whichever thread
    local = threading.local()  # .depth: transactions open on this thread; .feed: in the feed's read
    transaction, vector_changes, read_pair = store.transaction, store.vector_changes, store.read_pair

    @contextmanager
    def counted(*, write: bool) -> Iterator[Tx]:
        depth = getattr(local, "depth", 0)
        if depth == 0 and not getattr(local, "feed", False):  # a read inside one joins it
            opened.append(write)
        local.depth = depth + 1
        try:
            with transaction(write=write) as tx:
                yield tx
        finally:
            local.depth = depth

    def feed(embedder: str, after_seq: int, limit: int | None = None) -> Any:
        local.feed = True  # the index's own read of the change feed, before the snapshot
        try:
            return vector_changes(embedder, after_seq, limit)
        finally:
            local.feed = False

    paired: list[tuple[Tx, Tx | None]] = []
    read_in: list[tuple[str, Tx]] = []  # the vector side's reads of the store

    def spied(name: str, reader: Tx, read: Any, *args: Any) -> Any:
        read_in.append((name, reader))
        return read(*args)

    @contextmanager
    def counted_pair() -> Iterator[tuple[Tx, Tx | None]]:
        opened.append(False)
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        try:
            with read_pair() as (tx, second):
                if second is not None:
                    for name in ("visible_ids", "get_vectors"):
                        monkeypatch.setattr(second, name, partial(spied, name, second, getattr(second, name)))
                paired.append((tx, second))
                yield tx, second
        finally:
            local.depth = depth

    monkeypatch.setattr(store, "transaction", counted)
    monkeypatch.setattr(store, "vector_changes", feed)
    monkeypatch.setattr(store, "read_pair", counted_pair)
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
    assert opened == [False]  # one snapshot: no other transaction began, on any thread
    # the vector side read the store in the snapshot's second reader, beside the keyword side
    [(tx, second)] = paired
    assert tx is seen[0] and second is not None
    assert {name for name, _ in read_in} == {"visible_ids", "get_vectors"}
    assert all(reader is second for _, reader in read_in)
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


async def test_without_a_second_reader_the_snapshot_thread_finishes_alike(
    store: Store, add_item: AddItem, alice: Viewer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the store gives no second reader (a commit landed between the two first reads,
    no free connection), the snapshot's thread finishes the vector side after its keyword side:
    the same results."""
    for i in range(30):
        add_item(f"note {i}: we deploy the service with kubernetes, then check {i % 7} dashboards")
    add_item("a memory only the vectors find: rolling out containers to the cluster")
    engine, _ = await _indexed_engine(store)
    queries = ["kubernetes deploy", "rolling out containers", "dashboards 3", "nothing like it"]
    paired = [await engine.search(alice, q, k_final=10) for q in queries]
    read_pair = store.read_pair

    @contextmanager
    def alone() -> Iterator[tuple[Tx, Tx | None]]:
        with read_pair() as (tx, _):
            yield tx, None

    monkeypatch.setattr(store, "read_pair", alone)
    assert [await engine.search(alice, q, k_final=10) for q in queries] == paired
    assert all(paired[:3])


async def test_a_failure_inside_the_search_comes_out_as_itself(store: Store, add_item: AddItem) -> None:
    """A MemhubError of the rerank (or the viewer, or the store) reaches the caller as that
    error, with its kind, not wrapped in an ExceptionGroup (which the tool layer would report
    as an internal error)."""
    add_item("we deploy everything with kubernetes")
    engine, _ = await _indexed_engine(store)

    def rerank(_tx: Tx, _found: Candidates) -> None:
        raise MemhubError(ErrorKind.NOT_FOUND, "no such project")

    with pytest.raises(MemhubError) as raised:
        await engine.run("kubernetes", lambda _tx: Viewer(principal="alice", now=NOW), rerank)
    assert raised.value.kind == ErrorKind.NOT_FOUND
