"""VectorIndex: incremental refresh from the store's change feed, visibility filtering, speed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt
import pytest

from memhub.core.models import Viewer
from memhub.search import vectors
from memhub.search.vector_search import VectorSearch, vector_search_for
from memhub.search.vectors import VectorIndex
from memhub.store.base import Store, VectorChange
from memhub.store.open import open_store

AddItem = Callable[..., int]
EMB = "test-emb/8"
DIM = 8


def unit(index: int, dim: int = DIM) -> npt.NDArray[np.float32]:
    vec = np.zeros(dim, dtype=np.float32)
    vec[index % dim] = 1.0
    return vec


def put(store: Store, item_id: int, vec: npt.NDArray[np.float32], embedder: str = EMB) -> None:
    with store.transaction(write=True) as tx:
        tx.put_vector(item_id, embedder, np.asarray(vec, dtype="<f4").tobytes(), len(vec))


def rounded(hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    return [(item_id, round(score, 4)) for item_id, score in hits]


def visible_to(store: Store, viewer: Viewer) -> Callable[[list[int]], set[int]]:
    def allowed(ids: list[int]) -> set[int]:
        with store.transaction(write=False) as tx:
            return tx.visible_ids(viewer, ids, (), None)

    return allowed


def test_puts_updates_and_deletes_are_applied_incrementally(
    store: Store, add_item: AddItem, delete_item: Callable[[int], None]
) -> None:
    items = [add_item(f"item {i}") for i in range(5)]
    for i, item_id in enumerate(items):
        put(store, item_id, unit(i))
    index = VectorIndex(store, EMB, DIM)
    assert index.refresh() == 5
    assert len(index) == 5
    assert rounded(index.search(unit(2), 1)) == [(items[2], 1.0)]
    assert index.refresh() == 0  # nothing new

    put(store, items[2], unit(4))  # update: same row, new vector
    assert index.refresh() == 1
    assert len(index) == 5
    assert [i for i, _ in index.search(unit(4), 2)] == [items[2], items[4]]  # tie at 1.0: by id
    assert index.search(unit(2), 1)[0][1] == pytest.approx(0.0)

    delete_item(items[0])  # the trigger logs 'del'; row 0 is refilled by the last row
    assert index.refresh() == 1
    assert len(index) == 4
    assert items[0] not in index
    assert index.search(unit(0), 5, allowed=None)[0][1] == pytest.approx(0.0)
    for i in (1, 3):
        assert rounded(index.search(unit(i), 1)) == [(items[i], 1.0)]
    assert [i for i, _ in index.search(unit(4), 2)] == [items[2], items[4]]


def test_put_then_delete_before_refresh_is_a_no_op(
    store: Store, add_item: AddItem, delete_item: Callable[[int], None]
) -> None:
    index = VectorIndex(store, EMB, DIM)
    index.refresh()
    item = add_item("short-lived")
    put(store, item, unit(1))
    delete_item(item)
    index.refresh()
    assert len(index) == 0
    assert index.search(unit(1), 3) == []


def test_other_embedders_are_ignored(store: Store, add_item: AddItem) -> None:
    item = add_item("x")
    put(store, item, unit(1), embedder="other/8")
    index = VectorIndex(store, EMB, DIM)
    assert index.refresh() == 0
    assert len(index) == 0


def test_wrong_dimension_is_ignored(store: Store, add_item: AddItem) -> None:
    good, bad = add_item("good"), add_item("bad")
    put(store, good, unit(1))
    put(store, bad, np.ones(DIM * 2, dtype=np.float32))
    index = VectorIndex(store, EMB, DIM)
    index.refresh()
    assert len(index) == 1 and good in index


def test_capacity_doubles(store: Store, add_item: AddItem) -> None:
    index = VectorIndex(store, EMB, DIM, initial_capacity=2)
    for i in range(9):
        put(store, add_item(f"n{i}"), unit(i))
    index.refresh()
    assert len(index) == 9
    assert index.capacity == 16


def test_random_operations_match_a_model(
    store: Store, add_item: AddItem, delete_item: Callable[[int], None]
) -> None:
    rng = np.random.default_rng(7)
    index = VectorIndex(store, EMB, DIM, initial_capacity=1)
    model: dict[int, npt.NDArray[np.float32]] = {}
    items = [add_item(f"r{i}") for i in range(40)]
    alive = set(items)
    for step in range(200):
        item = int(rng.choice(sorted(alive)))
        if rng.random() < 0.1 and len(alive) > 5:
            delete_item(item)
            alive.discard(item)
            model.pop(item, None)
        else:
            vec = rng.normal(size=DIM).astype(np.float32)
            vec /= np.linalg.norm(vec)
            put(store, item, vec)
            model[item] = vec
        if step % 17 == 0:
            index.refresh()
    index.refresh()
    assert len(index) == len(model)
    query = rng.normal(size=DIM).astype(np.float32)
    expected = sorted(((i, float(v @ query)) for i, v in model.items()), key=lambda p: (-p[1], p[0]))
    got = index.search(query, len(model))
    assert [i for i, _ in got] == [i for i, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-5)


def test_writes_of_another_process_become_visible(db_url: str, store: Store) -> None:
    other = open_store(db_url)  # a second connection: another process sharing the file
    try:
        index = VectorIndex(store, EMB, DIM)
        index.refresh()
        version = store.data_version()
        with other.transaction(write=True) as tx:
            from memhub.store.base import NewItem

            item = tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="from afar")).id
            tx.put_vector(item, EMB, unit(3).tobytes(), DIM)
        assert store.data_version() != version
        assert index.refresh() == 1
        assert rounded(index.search(unit(3), 1)) == [(item, 1.0)]

        other_index = VectorIndex(other, EMB, DIM)  # and the other way round
        put(store, item, unit(5))
        other_index.refresh()
        assert rounded(other_index.search(unit(5), 1)) == [(item, 1.0)]
    finally:
        other.close()


def test_visibility_filter_is_respected_and_the_pool_widens(
    store: Store,
    add_item: AddItem,
    make_project: Callable[[str, str], int],
    alice: Viewer,
    bob: Viewer,
) -> None:
    secret_project = make_project("bobs-secrets", "bob")
    hidden = [
        add_item(f"secret {i}", owner="bob", scope="project", project_id=secret_project) for i in range(30)
    ]
    private = add_item("bob's own note", owner="bob", scope="user")
    public = add_item("public note")
    query = unit(0)
    for item in [*hidden, private]:
        put(store, item, query)  # the best matches are all invisible to alice
    put(store, public, (unit(0) + unit(1)) / np.sqrt(2))
    index = VectorIndex(store, EMB, DIM)
    index.refresh()

    calls: list[int] = []
    allowed = visible_to(store, alice)

    def counting(ids: list[int]) -> set[int]:
        calls.append(len(ids))
        return allowed(ids)

    hits = index.search(query, 1, counting)
    assert rounded(hits) == [(public, 0.7071)]
    # the first pool: 5/4 of the k + rescore_extra wanted (26), then all 32 rows: only new ids offered
    assert calls == [26, 6]
    assert [i for i, _ in index.search(query, 100, visible_to(store, alice))] == [public]
    bob_hits = [i for i, _ in index.search(query, 100, visible_to(store, bob))]
    assert sorted(bob_hits) == sorted([*hidden, private, public])
    assert index.search(query, 5, lambda ids: set()) == []


def test_query_dimension_is_checked(store: Store) -> None:
    with pytest.raises(ValueError):
        VectorIndex(store, EMB, DIM).search(np.ones(3), 1)


class _FakeFeed:
    """A feed without a database: the changes and, for the exact rescoring, the vectors."""

    def __init__(self, changes: list[VectorChange]) -> None:
        self.changes = changes
        self.vectors = {c.item_id: c.vec for c in changes}

    def vector_changes(
        self, embedder: str, after_seq: int, limit: int | None = None
    ) -> tuple[int, list[VectorChange]]:
        fresh = [c for c in self.changes if c.seq > after_seq][:limit]
        return (fresh[-1].seq if fresh else after_seq), fresh

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[_FakeFeed]:
        yield self

    def get_vectors(self, item_ids: Sequence[int], embedder: str) -> dict[int, bytes]:
        return {i: vec for i in item_ids if (vec := self.vectors.get(i)) is not None}


def test_timing_100k_x_384(capsys: pytest.CaptureFixture[str]) -> None:
    rows, dim = 100_000, 384
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(rows, dim)).astype("<f4")
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    feed = _FakeFeed([VectorChange(i + 1, i + 1, matrix[i].tobytes()) for i in range(rows)])
    index = VectorIndex(feed, "bench/384", dim)
    started = time.perf_counter()
    index.refresh()
    load_ms = (time.perf_counter() - started) * 1000
    assert len(index) == rows

    queries = rng.normal(size=(20, dim)).astype(np.float32)
    started = time.perf_counter()
    for query in queries:
        hits = index.search(query, 50)
    search_ms = (time.perf_counter() - started) * 1000 / len(queries)
    assert len(hits) == 50

    even: Callable[[list[int]], set[int]] = lambda ids: {i for i in ids if i % 2 == 0}  # noqa: E731
    started = time.perf_counter()
    for query in queries:
        hits = index.search(query, 50, even)
    filtered_ms = (time.perf_counter() - started) * 1000 / len(queries)
    assert len(hits) == 50 and all(i % 2 == 0 for i, _ in hits)

    started = time.perf_counter()
    index.refresh()
    noop_ms = (time.perf_counter() - started) * 1000
    with capsys.disabled():
        print(
            f"\nVectorIndex 100k x 384: initial load {load_ms:.0f} ms, search k=50 {search_ms:.2f} ms,"
            f" with filter {filtered_ms:.2f} ms, no-op refresh (fake feed) {noop_ms:.2f} ms"
        )


def test_refresh_on_the_store_reads_what_changed(store: Store) -> None:
    """The index loads every stored vector once, a refresh with nothing new changes nothing, and
    one vector put afterwards is found by the next refresh (timings: bench/, not here)."""
    rng = np.random.default_rng(1)
    with store.transaction(write=True) as tx:
        from memhub.store.base import NewItem

        for i in range(300):
            item = tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body=f"v{i}")).id
            vec = rng.normal(size=384).astype("<f4")
            tx.put_vector(item, "bench/384", (vec / np.linalg.norm(vec)).astype("<f4").tobytes(), 384)
    index = VectorIndex(store, "bench/384", 384)
    index.refresh()
    assert len(index) == 300
    for _ in range(3):
        index.refresh()
    assert len(index) == 300
    put(store, 1, unit(0, 384), embedder="bench/384")
    index.refresh()
    assert len(index) == 300  # item 1 had a vector: replaced, not added
    assert index.search(unit(0, 384), 1)[0][0] == 1


def test_the_factory_gives_the_numpy_index_for_sqlite(store: Store) -> None:
    index = vector_search_for(store, EMB, DIM)
    assert isinstance(index, VectorSearch) and index.embedder_id == EMB and index.size() == 0


@pytest.mark.parametrize(
    ("approx_min", "cells"),
    [(10**9, vectors.SCAN_CELLS), (10**9, 250), (40, vectors.SCAN_CELLS)],
    ids=["scanned at once", "scanned two at a time", "sketched"],
)
def test_search_many_answers_as_search_does_with_one_read_of_the_store(
    store: Store,
    add_item: AddItem,
    delete_item: Callable[[int], None],
    alice: Viewer,
    bob: Viewer,
    approx_min: int,
    cells: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vectors, "SCAN_CELLS", cells)  # 250 over 120 rows: groups of two queries
    rng = np.random.default_rng(11)
    owners = ["alice", "bob"]
    items = [add_item(f"m{i}", owner=owners[i % 2], scope="user") for i in range(120)]
    for item in items:
        vec = rng.normal(size=DIM).astype(np.float32)
        put(store, item, vec / np.linalg.norm(vec))
    sizes = {"approx_min": approx_min, "batch_approx_min": approx_min}
    index = VectorIndex(store, EMB, DIM, **sizes, sketch_dims=4, rerank_min=30)
    index.refresh()
    delete_item(items[3])  # its vector is gone from the store, not yet from the index
    queries = [rng.normal(size=DIM).astype(np.float32) for _ in range(6)]
    filters: list[Callable[[list[int]], set[int]] | None] = [
        visible_to(store, alice),
        visible_to(store, bob),
        None,
        visible_to(store, alice),
        lambda ids: set(),
        visible_to(store, bob),
    ]
    asks = list(zip(queries, filters, strict=True))
    one_by_one = [index.search(query, 7, allowed) for query, allowed in asks]

    feed = _CountingFeed(store)  # the real store, its reads of vectors counted
    counted = VectorIndex(feed, EMB, DIM, **sizes, sketch_dims=4, rerank_min=30)
    counted.refresh()
    together = counted.search_many(asks, 7)
    assert together == one_by_one
    assert [len(hits) for hits in together] == [7, 7, 7, 7, 0, 7]
    assert feed.reads == 1  # the candidates of every search rescored from one read
    assert index.search_many([], 7) == []


def test_one_query_takes_the_sketch_pass_from_approx_min_a_batch_from_batch_approx_min(
    store: Store, add_item: AddItem
) -> None:
    """A sketch of one direction out of eight misses some of the best rows: a search alone on
    such an index shows where the sketch pass ran, a batch below `batch_approx_min` scans."""
    rng = np.random.default_rng(5)
    for i in range(120):
        vec = rng.normal(size=DIM).astype(np.float32)
        put(store, add_item(f"m{i}"), vec / np.linalg.norm(vec))
    queries = [rng.normal(size=DIM).astype(np.float32) for _ in range(20)]
    every_row = VectorIndex(store, EMB, DIM, approx_min=10**9)
    every_row.refresh()
    truth = [every_row.search(query, 7) for query in queries]
    lossy = {"approx_min": 40, "sketch_dims": 1, "rerank_min": 8, "rerank_share": 0.01}

    batch_scans = VectorIndex(store, EMB, DIM, **lossy, batch_approx_min=10**9)
    batch_scans.refresh()
    alone = [batch_scans.search(query, 7) for query in queries]
    assert alone != truth  # one query past approx_min: the sketch pass
    assert batch_scans.search_many([(query, None) for query in queries], 7) == truth

    batch_sketched = VectorIndex(store, EMB, DIM, **lossy, batch_approx_min=40)
    batch_sketched.refresh()
    assert batch_sketched.search_many([(query, None) for query in queries], 7) == alone


class _CountingFeed:
    """A store seen through the index's `VectorFeed`, counting its reads of vectors."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reads = 0

    def vector_changes(
        self, embedder: str, after_seq: int, limit: int | None = None
    ) -> tuple[int, list[VectorChange]]:
        return self.store.vector_changes(embedder, after_seq, limit)

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[_CountingFeed]:
        with self.store.transaction(write=write) as tx:
            self.tx = tx
            yield self

    def get_vectors(self, item_ids: Sequence[int], embedder: str) -> dict[int, bytes]:
        self.reads += 1
        return self.tx.get_vectors(item_ids, embedder)
