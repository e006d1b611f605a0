"""Several processes on one store each run a vector backfill (replicas on PostgreSQL, processes
sharing a SQLite file): every missing vector is computed once, by one of them, and a claim
left by a process that died is taken over when its lease runs out. Each `Store` object opened
on the database stands for another process."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Sequence
from functools import partial

import anyio
import pytest
from tests.search.conftest import AddItem

from memhub.search import EmbeddingService, HashingEmbedder, VectorBackfill
from memhub.search.backfill import HERE, _gone_here
from memhub.search.embedders.base import Matrix
from memhub.store.base import Store
from memhub.store.open import open_store

pytestmark = pytest.mark.anyio


class CountingEmbedder(HashingEmbedder):
    """Counts every text it embeds, in a tally shared by the "processes" of a test."""

    def __init__(self, tally: Counter[str], lock: threading.Lock) -> None:
        super().__init__(passage_seconds=0.002)
        self.tally, self.lock = tally, lock

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        with self.lock:
            self.tally.update(texts)
        return super().embed_passages(texts)


def _with_vectors(store: Store, embedder_id: str) -> int:
    _, changes = store.vector_changes(embedder_id, 0)
    return sum(1 for change in changes if change.vec is not None)


async def _until(condition: partial[bool], seconds: float = 20.0) -> None:
    with anyio.fail_after(seconds):
        while not await anyio.to_thread.run_sync(condition):
            await anyio.sleep(0.05)


async def test_two_processes_embed_each_missing_vector_once(
    db_url: str, store: Store, add_item: AddItem
) -> None:
    tally: Counter[str] = Counter()
    lock = threading.Lock()
    other = open_store(db_url)
    backfills = [
        VectorBackfill(s, EmbeddingService(CountingEmbedder(tally, lock)), prefetch=16)
        for s in (store, other)
    ]
    embedder_id = backfills[0].embedding.id
    try:
        async with anyio.create_task_group() as group:
            for backfill in backfills:
                group.start_soon(partial(backfill.run_forever, 0.02, max_poll_seconds=0.1, batch=4))
            for i in range(120):
                add_item(f"memory number {i} about replicas")
                if i % 10 == 0:
                    for backfill in backfills:
                        backfill.notify()
                    await anyio.sleep(0)
            for backfill in backfills:
                backfill.notify()
            await _until(partial(lambda: _with_vectors(store, embedder_id) == 120))
            group.cancel_scope.cancel()
    finally:
        other.close()
    assert len(tally) == 120 and max(tally.values()) == 1  # each text embedded once, by one process
    assert sum(b.embedded for b in backfills) == 120


async def test_a_dead_process_claim_is_taken_over_when_its_lease_ends(
    store: Store, add_item: AddItem
) -> None:
    ids = [add_item(f"note {i}") for i in range(3)]
    backfill = VectorBackfill(store, EmbeddingService(HashingEmbedder()))
    embedder_id = backfill.embedding.id
    claimed_at = time.time()
    with store.transaction(write=True) as tx:  # a process elsewhere claimed two items, then died
        claimed = tx.claim_vectors(embedder_id, ids[:2], "dead", now=claimed_at, lease_s=2.0)  # type: ignore[attr-defined]
        assert claimed == (ids[:2], [])
    async with anyio.create_task_group() as group:
        group.start_soon(partial(backfill.run_forever, 0.02, max_poll_seconds=0.1))
        await _until(partial(lambda: _with_vectors(store, embedder_id) >= 1))
        if time.time() - claimed_at < 1.5:  # within the lease (a loaded machine may be past it)
            assert _with_vectors(store, embedder_id) == 1  # the dead process's items wait
        await _until(partial(lambda: _with_vectors(store, embedder_id) == 3), seconds=10.0)
        group.cancel_scope.cancel()
    assert backfill.embedded == 3 and not backfill.elsewhere


async def test_a_killed_process_on_this_host_leaves_no_claim_to_wait_for(
    store: Store, add_item: AddItem
) -> None:
    ids = [add_item(f"note {i}") for i in range(3)]
    gone = subprocess.Popen(["true"])  # a process that ran here and has exited
    gone.wait()
    dead_owner = f"{HERE}:{gone.pid}:cafe"
    backfill = VectorBackfill(store, EmbeddingService(HashingEmbedder()))
    embedder_id = backfill.embedding.id
    with store.transaction(write=True) as tx:  # claimed for five minutes, then SIGKILLed
        tx.claim_vectors(embedder_id, ids[:2], dead_owner, now=time.time(), lease_s=300.0)  # type: ignore[attr-defined]
    async with anyio.create_task_group() as group:
        group.start_soon(partial(backfill.run_forever, 0.02, max_poll_seconds=0.1))
        await _until(partial(lambda: _with_vectors(store, embedder_id) == 3), seconds=60.0)  # not 300
        group.cancel_scope.cancel()
    with store.transaction(write=False) as tx:
        assert tx.claim_owners() == []  # type: ignore[attr-defined]


async def test_a_process_that_stops_drops_its_claims(store: Store, add_item: AddItem) -> None:
    for i in range(8):
        add_item(f"note {i}")
    started = threading.Event()

    class Stuck(HashingEmbedder):
        def embed_passages(self, texts: Sequence[str]) -> Matrix:
            started.set()  # the batch is claimed; the model never finishes it
            time.sleep(0.5)
            return super().embed_passages(texts)

    backfill = VectorBackfill(store, EmbeddingService(Stuck()))
    async with anyio.create_task_group() as group:
        group.start_soon(partial(backfill.run_forever, 0.02, max_poll_seconds=0.1))
        await _until(partial(started.is_set))
        with store.transaction(write=False) as tx:
            assert tx.claim_owners() == [backfill.owner]  # type: ignore[attr-defined]
        group.cancel_scope.cancel()
    with store.transaction(write=False) as tx:
        assert tx.claim_owners() == []  # type: ignore[attr-defined]


def test_whose_claims_are_taken_over_at_once(store: Store) -> None:
    """Only a process of this host and pid namespace whose pid no longer runs, or an earlier
    process that had this one's pid (a restarted container's pid 1); never a live backfill of
    this process, nor a process elsewhere (its pid means nothing here: its lease runs out)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert _gone_here(f"{HERE}:{gone.pid}:cafe")
    assert _gone_here(f"{HERE}:{os.getpid()}:0ld0ne")  # this pid, not a live backfill of ours
    live = VectorBackfill(store, EmbeddingService(HashingEmbedder()))
    assert not _gone_here(live.owner)
    live._release_mine()  # it stops
    assert _gone_here(live.owner)
    assert not _gone_here(f"other-host/abcd/123:{gone.pid}:cafe")
    assert not _gone_here(f"{HERE}:1:cafe")  # pid 1 runs here
    assert not _gone_here("dead")
