"""VectorBackfill.run_once with several batches: a batch is stored and its follow-up work
(`on_embedded`) done while the next batch is embedded; a write stops the run; a failure of a
later batch is raised as itself, with the batches before it stored."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial

import anyio
import numpy as np
import pytest

from memhub.core.errors import ErrorKind, MemhubError
from memhub.search import EmbeddingService, HashingEmbedder, VectorBackfill
from memhub.search.embedders import EmbedderUnavailable
from memhub.search.embedders.base import Matrix
from memhub.store.base import NewItem, Store
from memhub.store.open import open_store

AddItem = Callable[..., int]


class Scripted(HashingEmbedder):
    """Calls `before(n)` (n: 1 for the first passage call) on the worker thread first."""

    def __init__(self, before: Callable[[int], None]) -> None:
        super().__init__()
        self.before = before
        self.calls = 0

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        self.calls += 1
        self.before(self.calls)
        return super().embed_passages(texts)


def _stored(store: Store, embedder_id: str) -> set[int]:
    _, changes = store.vector_changes(embedder_id, 0)
    return {change.item_id for change in changes if change.vec is not None}


@pytest.mark.anyio
async def test_a_batch_is_linked_while_the_next_is_embedded(store: Store, add_item: AddItem) -> None:
    ids = [add_item(f"memo number {i}") for i in range(6)]
    second_started = threading.Event()

    def before(call: int) -> None:
        if call == 2:
            second_started.set()

    linked: list[list[int]] = []
    overlapped: list[bool] = []

    async def on_embedded(pairs: list[tuple[int, np.ndarray]]) -> None:
        if not linked:  # the first batch's follow-up work waits for the second batch's embedding:
            # one after the other, it waits in vain
            overlapped.append(await anyio.to_thread.run_sync(second_started.wait, 5))
        linked.append([item for item, _ in pairs])

    service = EmbeddingService(Scripted(before))
    backfill = VectorBackfill(store, service, on_embedded=on_embedded)
    with anyio.fail_after(20):
        assert await backfill.run_once(batch=2, batches=3) == 6
    assert overlapped == [True] and linked == [ids[0:2], ids[2:4], ids[4:6]]
    assert _stored(store, service.id) == set(ids)
    assert backfill.rate is not None and backfill.rate > 0
    assert await backfill.run_once(batch=2, batches=3) == 0


@pytest.mark.anyio
async def test_a_write_stops_the_run_after_the_batch_under_way(store: Store, add_item: AddItem) -> None:
    ids = [add_item(f"memo number {i}") for i in range(6)]
    service = EmbeddingService(HashingEmbedder())
    backfill: VectorBackfill

    async def on_embedded(pairs: list[tuple[int, np.ndarray]]) -> None:
        backfill.notify()  # this process wrote something: the next scan should read it first

    backfill = VectorBackfill(store, service, on_embedded=on_embedded)
    assert await backfill.run_once(batch=2, batches=3) == 4  # the batch embedded meanwhile is stored
    assert _stored(store, service.id) == set(ids[:4]) and backfill.backlog == 2


@pytest.mark.anyio
async def test_a_later_batch_failing_leaves_the_earlier_ones_stored(store: Store, add_item: AddItem) -> None:
    ids = [add_item(f"memo number {i}") for i in range(6)]

    def before(call: int) -> None:
        if call == 2:
            raise EmbedderUnavailable("the model went away")

    service = EmbeddingService(Scripted(before))
    backfill = VectorBackfill(store, service)
    with pytest.raises(EmbedderUnavailable, match="went away"):  # itself, not an ExceptionGroup
        await backfill.run_once(batch=2, batches=3)
    assert _stored(store, service.id) == set(ids[:2])
    assert backfill.backlog == 4  # not lost: embedded by the next run
    assert await backfill.run_once(batch=4, batches=1) == 4
    assert _stored(store, service.id) == set(ids)


@pytest.mark.anyio
async def test_batches_must_be_positive(store: Store) -> None:
    backfill = VectorBackfill(store, EmbeddingService(HashingEmbedder()))
    with pytest.raises(MemhubError, match="at least 1"):
        await backfill.run_once(batch=2, batches=0)


@pytest.mark.anyio
async def test_another_process_committing_stops_the_run(db_url: str, store: Store, add_item: AddItem) -> None:
    ids = [add_item(f"memo number {i}") for i in range(6)]
    service = EmbeddingService(HashingEmbedder())
    other = open_store(db_url)

    async def on_embedded(pairs: list[tuple[int, np.ndarray]]) -> None:
        with other.transaction(write=True) as tx:  # another process edits or adds a memory
            tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="added elsewhere"))

    try:
        backfill = VectorBackfill(store, service, on_embedded=on_embedded)
        assert await backfill.run_once(batch=2, batches=3) == 4  # the prefetched texts are read again
        assert _stored(store, service.id) == set(ids[:4])
    finally:
        other.close()


@pytest.mark.anyio
async def test_while_searches_run_one_batch_at_a_time(store: Store, add_item: AddItem) -> None:
    for i in range(6):
        add_item(f"memo number {i}")
    service = EmbeddingService(HashingEmbedder())
    await service.embed_query("a search under way")
    assert service.searching
    backfill = VectorBackfill(store, service)
    assert await backfill.run_once(batch=2, batches=3) == 2  # the other core is the searches'
    assert backfill.backlog == 4


def _refuse_vectors_of(store: Store, db_url: str, item_id: int | None) -> None:
    """The database itself refuses to store a vector for `item_id` (a trigger; None: drops it)."""
    postgres = db_url.startswith("postgres")
    if item_id is None:
        statements = ["DROP TRIGGER refuse ON vectors" if postgres else "DROP TRIGGER refuse"]
    elif postgres:
        statements = [
            "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN IF NEW.item_id = "
            f"{int(item_id)} THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER refuse BEFORE INSERT ON vectors FOR EACH ROW EXECUTE FUNCTION refuse()",
        ]
    else:
        statements = [
            f"CREATE TRIGGER refuse BEFORE INSERT ON vectors WHEN NEW.item_id = {int(item_id)}"
            " BEGIN SELECT RAISE(ABORT, 'refused'); END"
        ]
    with store.transaction(write=True) as tx:
        for statement in statements:
            tx.conn.execute(statement)  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_batch_the_store_refused_is_embedded_again(
    db_url: str, store: Store, add_item: AddItem
) -> None:
    """A batch whose vectors the store failed to write is read again by the next scan, not left
    to the full rescan minutes later."""
    ids = [add_item(f"memo number {i}") for i in range(4)]
    service = EmbeddingService(HashingEmbedder())
    backfill = VectorBackfill(store, service)
    _refuse_vectors_of(store, db_url, ids[0])
    with pytest.raises(MemhubError):
        await backfill.run_once(batch=2, batches=1)
    _refuse_vectors_of(store, db_url, None)
    assert _stored(store, service.id) == set()
    with anyio.fail_after(20):
        while await backfill.run_once(batch=2, batches=1):
            pass
    assert _stored(store, service.id) == set(ids)


@pytest.mark.anyio
async def test_a_refused_batch_in_a_pipelined_run_is_never_settled(
    db_url: str, store: Store, add_item: AddItem
) -> None:
    """While a batch cannot be stored, this process's writes are not reported as embedded (the
    batches after it in the queue are stored meanwhile); once the store takes it, they are."""
    ids = [add_item(f"memo number {i}") for i in range(10)]
    service = EmbeddingService(HashingEmbedder())
    backfill = VectorBackfill(store, service)
    _refuse_vectors_of(store, db_url, ids[2])
    backfill.notify()  # these writes were this process's
    async with anyio.create_task_group() as group:
        group.start_soon(partial(backfill.run_forever, 0.02, max_poll_seconds=0.1, batch=2))
        with anyio.fail_after(20):
            while not backfill.running or not set(ids[4:]) <= _stored(store, service.id):
                await anyio.sleep(0.02)
        assert not await backfill.settle(1.0)  # item 2's batch is missing
        assert not set(ids[2:4]) & _stored(store, service.id)
        _refuse_vectors_of(store, db_url, None)
        assert await backfill.settle(20)
        assert _stored(store, service.id) == set(ids)
        group.cancel_scope.cancel()


class _FailingVersions(VectorBackfill):
    """Its store's commit counter fails from the `fail_from`-th read on (a dropped connection)."""

    fail_from = 2
    reads = 0

    def _data_version(self) -> int | None:
        self.reads += 1
        if self.reads >= self.fail_from:
            raise MemhubError(ErrorKind.UNAVAILABLE, "the store went away")
        return super()._data_version()


@pytest.mark.anyio
async def test_a_batch_whose_commit_check_fails_is_read_again_and_out_of_the_hand(
    store: Store, add_item: AddItem
) -> None:
    """Between two batches the run asks whether another process committed; when that read
    fails, the batch embedded meanwhile is neither stored nor counted as under way: a read's
    estimate stays true, and the next scan reads the batch again."""
    ids = [add_item(f"memo number {i}") for i in range(6)]
    backfill = _FailingVersions(store, EmbeddingService(HashingEmbedder()))
    with anyio.fail_after(20), pytest.raises(MemhubError, match="went away"):
        await backfill.run_once(batch=2, batches=3)
    assert backfill.under_way == 0
    backfill.fail_from = 10**9
    while await backfill.run_once(batch=2, batches=3):
        pass
    assert _stored(store, backfill.embedding.id) == set(ids)
    assert backfill.under_way == 0
