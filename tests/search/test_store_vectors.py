"""The vector search `vector_search_for` picks, on both backends: SQLite's numpy index, PostgreSQL's
search in the database (pgvector HNSW, `StoreVectorSearch`). Same answers, the visibility rule
applied, and no replica searching a stale copy: what one store writes, another finds."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from tests.store.backends import Backend

from memhub.core.models import Viewer
from memhub.search import EmbeddingService, HashingEmbedder, SearchEngine, VectorBackfill
from memhub.search.store_vectors import StoreVectorSearch
from memhub.search.vector_search import VectorSearch, VisibleTo, vector_search_for
from memhub.search.vectors import VectorIndex
from memhub.store.base import NearestVectors, NewItem, Store, Visibility
from memhub.store.open import open_store

AddItem = Callable[..., int]
EMB = "test-emb/8"
DIM = 8
DEADLINE_S = 2.0


def unit(index: int, dim: int = DIM) -> npt.NDArray[np.float32]:
    vec = np.zeros(dim, dtype=np.float32)
    vec[index % dim] = 1.0
    return vec


def put(store: Store, item_id: int, vec: npt.NDArray[np.float32], embedder: str = EMB) -> None:
    with store.transaction(write=True) as tx:
        tx.put_vector(item_id, embedder, np.asarray(vec, dtype="<f4").tobytes(), len(vec))


def search(
    index: VectorSearch, query: npt.ArrayLike, k: int, allowed: Callable[[list[int]], set[int]] | None = None
) -> list[tuple[int, float]]:
    index.refresh()  # what SearchEngine does before every search
    return [(item_id, round(score, 4)) for item_id, score in index.search(query, k, allowed)]


def test_the_factory_picks_the_backends_search(store: Store, backend: Backend) -> None:
    index = vector_search_for(store, EMB, DIM)
    if backend.name == "postgresql":
        assert isinstance(store, NearestVectors) and isinstance(index, StoreVectorSearch)
    else:
        assert not isinstance(store, NearestVectors) and isinstance(index, VectorIndex)


def test_best_first_ties_by_id_exact_cosines_and_changes_seen_at_once(
    store: Store, add_item: AddItem, delete_item: Callable[[int], None]
) -> None:
    items = [add_item(f"item {i}") for i in range(6)]
    for i, item_id in enumerate(items):
        put(store, item_id, unit(0) if i < 3 else unit(1))  # three ties at the top
    index = vector_search_for(store, EMB, DIM)
    query = unit(0) * 0.8 + unit(1) * 0.6
    assert search(index, query, 4) == [(items[0], 0.8), (items[1], 0.8), (items[2], 0.8), (items[3], 0.6)]
    assert index.size() == 6  # a gauge: the numpy index's after a refresh
    put(store, items[4], unit(0))  # an update
    delete_item(items[0])  # a delete (another connection)
    assert search(index, query, 4) == [(items[1], 0.8), (items[2], 0.8), (items[4], 0.8), (items[3], 0.6)]
    put(store, items[5], unit(2), embedder="other/8")  # another embedder's vectors are not searched
    assert search(index, unit(2), 1)[0][1] == 0.0
    assert items[5] in {i for i, _ in search(index, unit(1), 10)}
    assert index.size() == 5
    with pytest.raises(ValueError):
        index.search(np.ones(3), 1)
    assert index.search(query, 0) == []


def test_the_visibility_rule_never_starves_the_results(
    store: Store,
    add_item: AddItem,
    make_project: Callable[[str, str], int],
    alice: Viewer,
    bob: Viewer,
) -> None:
    """The best matches (300 of them) are all hidden from alice: the rule inside the query (or
    the widening pool) still finds her one visible item, and nothing of bob's."""
    secret_project = make_project("bobs-secrets", "bob")
    query = unit(0)
    with store.transaction(write=True) as tx:
        hidden = [
            tx.insert_item(
                NewItem(kind="memory", owner="bob", scope="project", project_id=secret_project, body=f"s{i}")
            ).id
            for i in range(300)
        ]
        for item_id in hidden:
            tx.put_vector(item_id, EMB, query.astype("<f4").tobytes(), DIM)
    private = add_item("bob's own note", owner="bob", scope="user")
    public = add_item("public note")
    claim = add_item("a public claim", kind="claim")
    put(store, private, query)
    put(store, public, (unit(0) + unit(1)) / np.sqrt(2))
    put(store, claim, (unit(0) + unit(2)) / np.sqrt(2))
    index = vector_search_for(store, EMB, DIM)

    for_alice = VisibleTo(store, Visibility(alice))
    assert search(index, query, 1, for_alice) == [(public, 0.7071)]
    assert search(index, query, 100, for_alice) == [(public, 0.7071), (claim, 0.7071)]
    only_claims = VisibleTo(store, Visibility(alice, ("claim",)))
    assert search(index, query, 5, only_claims) == [(claim, 0.7071)]
    in_project = VisibleTo(store, Visibility(bob, (), secret_project))
    assert sorted(i for i, _ in search(index, query, 500, in_project)) == sorted(hidden)
    assert search(index, query, 5, VisibleTo(store, Visibility(alice, (), secret_project))) == []
    # a plain callable (no rule to push into a query): applied to candidates, pool widening
    plain = for_alice.__call__
    assert search(index, query, 1, plain) == [(public, 0.7071)]
    assert search(index, query, 5, lambda ids: set()) == []
    bob_hits = {i for i, _ in search(index, query, 1000, VisibleTo(store, Visibility(bob)))}
    assert bob_hits == {*hidden, private, public, claim}
    # several searches at once (the backfill's links): each answered as alone
    asks = [(query, for_alice), (query, in_project), (unit(2), only_claims), (query, plain), (unit(1), None)]
    alone = [index.search(q, 3, allowed) for q, allowed in asks]
    assert index.search_many(asks, 3) == alone
    assert [len(hits) for hits in alone] == [2, 3, 1, 2, 3]


def test_nothing_expired_or_of_a_closed_boundary_is_found(
    store: Store, add_item: AddItem, alice: Viewer
) -> None:
    kept = add_item("kept")
    gone = add_item("gone")
    with store.transaction(write=True) as tx:
        tx.update_item(gone, {"expires_at": "2000-01-01T00:00:00.000000Z"})
    for item_id in (kept, gone):
        put(store, item_id, unit(0))
    index = vector_search_for(store, EMB, DIM)
    assert search(index, unit(0), 5, VisibleTo(store, Visibility(alice))) == [(kept, 1.0)]
    no_classes = Viewer("alice", alice.now, boundaries=frozenset())
    assert search(index, unit(0), 5, VisibleTo(store, Visibility(no_classes))) == []


@pytest.mark.anyio
async def test_a_memory_stored_through_one_replica_is_found_through_another(
    db_url: str, alice: Viewer
) -> None:
    """Two stores on one database (two replicas): what A stores and embeds, B finds by
    keyword and by vector within 2 s, polled. On PostgreSQL B keeps no index of its own."""
    a, b = open_store(db_url), open_store(db_url)
    try:
        service_a, service_b = EmbeddingService(HashingEmbedder()), EmbeddingService(HashingEmbedder())
        await service_a.load()
        await service_b.load()
        vectors_a = vector_search_for(a, service_a.id, service_a.dim)
        engine_b = SearchEngine(b, service_b, vector_search_for(b, service_b.id, service_b.dim))
        assert await engine_b.search(alice, "kubernetes") == []  # B has searched before the write
        with a.transaction(write=True) as tx:
            stored = tx.insert_item(
                NewItem(kind="memory", owner="alice", scope="global", body="we deploy with kubernetes")
            ).id
        assert await VectorBackfill(a, service_a, vectors_a).run_once() == 1

        deadline = time.monotonic() + DEADLINE_S
        keyword = vector = False
        while not (keyword and vector):
            assert time.monotonic() < deadline, f"keyword {keyword}, vector {vector} after {DEADLINE_S} s"
            hits = await engine_b.search(alice, "kubernetes", alpha=0.0)  # text alone
            keyword = [h.item_id for h in hits] == [stored]
            hits = await engine_b.search(alice, "kubernetis", alpha=1.0)  # misspelt: vectors alone
            vector = [h.item_id for h in hits] == [stored] and hits[0].vector_score is not None
            await _yield()
    finally:
        a.close()
        b.close()


async def _yield() -> None:
    import anyio

    await anyio.sleep(0)  # let other tasks run between polls (no fixed wait)
