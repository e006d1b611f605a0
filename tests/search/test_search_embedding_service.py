"""EmbeddingService: background loading, one inference at a time, queries ahead of passages."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import anyio
import numpy as np
import pytest

from memhub.search.embedders import EmbedderUnavailable, HashingEmbedder
from memhub.search.embedders.base import Matrix
from memhub.search.embedding import EmbeddingService


class SlowEmbedder:
    """HashingEmbedder with a slow load and slow, recorded inferences."""

    def __init__(self, *, load_seconds: float = 0.0, call_seconds: float = 0.0, fail: bool = False) -> None:
        self.inner = HashingEmbedder(dim=32)
        self.load_seconds = load_seconds
        self.call_seconds = call_seconds
        self.fail = fail
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.active = 0
        self.max_active = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return "slow/32"

    @property
    def dim(self) -> int:
        return 32

    def load(self) -> None:
        time.sleep(self.load_seconds)
        if self.fail:
            raise EmbedderUnavailable("the slow embedder is broken", extra="slow")

    def _call(self, kind: str, texts: Sequence[str]) -> Matrix:
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.threads.add(threading.get_ident())
        try:
            time.sleep(self.call_seconds)
            self.calls.append((kind, tuple(texts)))
            return self.inner.embed_passages(texts)
        finally:
            with self._lock:
                self.active -= 1

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        return self._call("passage", texts)

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        return self._call("query", texts)


@pytest.mark.anyio
async def test_embeds_in_chunks_with_the_wrapped_embedder() -> None:
    embedder = HashingEmbedder()
    service = EmbeddingService(embedder, chunk_size=2)
    assert (service.id, service.dim, service.ready) == ("hash-v1/256", 256, False)
    texts = [f"text number {i}" for i in range(5)]
    matrix = await service.embed_passages(texts)
    assert service.ready
    assert np.array_equal(matrix, embedder.embed_passages(texts))
    query = await service.embed_query("text number 3")
    assert query.shape == (256,) and query.dtype == np.float32
    assert (await service.embed_passages([])).shape == (0, 256)
    assert service.queue_depth == 0


@pytest.mark.anyio
async def test_background_load_does_not_block() -> None:
    service = EmbeddingService(SlowEmbedder(load_seconds=0.5))
    started = time.perf_counter()
    service.start_loading()
    service.start_loading()  # idempotent
    assert time.perf_counter() - started < 0.1
    assert not service.ready
    with anyio.fail_after(5):
        while not service.ready:
            await anyio.sleep(0.02)
    assert service.load_seconds is not None and service.load_seconds >= 0.5
    assert service.error is None


@pytest.mark.anyio
async def test_failed_load_is_reported() -> None:
    service = EmbeddingService(SlowEmbedder(fail=True))
    service.start_loading()
    with anyio.fail_after(5):
        while service.error is None:
            await anyio.sleep(0.01)
    assert not service.ready
    assert "memhub[slow]" in (service.error or "")
    with pytest.raises(EmbedderUnavailable):
        await service.embed_query("x")
    with pytest.raises(EmbedderUnavailable):
        await service.load()


@pytest.mark.anyio
async def test_one_inference_at_a_time_and_queries_go_first() -> None:
    embedder = SlowEmbedder(call_seconds=0.05)
    service = EmbeddingService(embedder, chunk_size=1)
    await service.load()
    depths: list[int] = []

    async def backfill() -> None:
        await service.embed_passages([f"p{i}" for i in range(8)])

    async def searches() -> None:
        await anyio.sleep(0.02)  # the first passage chunk is running
        depths.append(service.queue_depth)
        async with anyio.create_task_group() as group:
            group.start_soon(service.embed_query, "q1")
            group.start_soon(service.embed_query, "q2")

    async with anyio.create_task_group() as group:
        group.start_soon(backfill)
        group.start_soon(searches)

    kinds = [kind for kind, _ in embedder.calls]
    assert kinds[:3] == ["passage", "query", "query"]
    assert [texts for kind, texts in embedder.calls if kind == "passage"] == [(f"p{i}",) for i in range(8)]
    assert embedder.max_active == 1
    assert depths == [1]
    assert service.queue_depth == 0


@pytest.mark.anyio
async def test_event_loop_keeps_running_during_inference() -> None:
    service = EmbeddingService(SlowEmbedder(call_seconds=0.3))
    await service.load()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        await service.embed_query("slow")
        group.cancel_scope.cancel()
    assert ticks >= 10


@pytest.mark.anyio
async def test_a_cancelled_waiter_does_not_wedge_the_gate() -> None:
    embedder = SlowEmbedder(call_seconds=0.1)
    service = EmbeddingService(embedder)
    await service.load()
    async with anyio.create_task_group() as group:
        group.start_soon(service.embed_query, "running")
        await anyio.sleep(0.02)
        with anyio.move_on_after(0.02):
            await service.embed_query("cancelled while waiting")
    with anyio.fail_after(2):
        await service.embed_query("after")
    assert [texts for _, texts in embedder.calls] == [("running",), ("after",)]
    assert service.queue_depth == 0


def test_passages_are_chunked_by_count_and_characters() -> None:
    service = EmbeddingService(HashingEmbedder(), chunk_size=3, chunk_chars=10)
    chunks = service._chunks(["aaaa", "bbbb", "ccc", "d" * 30, "e", "f", "g", "h"])
    assert chunks == [["aaaa", "bbbb"], ["ccc"], ["d" * 30], ["e", "f", "g"], ["h"]]


@pytest.mark.anyio
async def test_start_loading_is_instant_while_a_lazy_load_runs() -> None:
    service = EmbeddingService(SlowEmbedder(load_seconds=0.5))
    async with anyio.create_task_group() as group:
        group.start_soon(service.embed_query, "lazy load")
        await anyio.sleep(0.05)
        started = time.perf_counter()
        service.start_loading()
        assert time.perf_counter() - started < 0.05
    assert service.ready


# -- issue 21 §5: repeated queries are free --------------------------------------------------------


class CountingEmbedder(HashingEmbedder):
    """The real hash embedder, counting the query texts it embeds."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.queries: list[str] = []

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        self.queries.extend(texts)
        return super().embed_queries(texts)


@pytest.mark.anyio
async def test_a_repeated_query_is_not_embedded_again() -> None:
    embedder = CountingEmbedder()
    service = EmbeddingService(embedder, query_cache=2)
    first = await service.embed_query("kubernetes rollout")
    again = await service.embed_query("kubernetes rollout")
    assert embedder.queries == ["kubernetes rollout"] and service.cache_hits == 1
    assert np.array_equal(first, again) and not again.flags.writeable  # shared: nobody may change it
    await service.embed_query("billing")
    await service.embed_query("kubernetes rollout")  # the most recent of two: still cached
    await service.embed_query("search")  # "billing" is the least recently used: dropped
    await service.embed_query("billing")
    assert embedder.queries == ["kubernetes rollout", "billing", "search", "billing"]


# -- issue 21 §2: an indexer of its own; both cores while no query waits ------------------------------


class HeldEmbedder(SlowEmbedder):
    """SlowEmbedder whose passage calls block until `release` is set (a long batch in flight)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        self.entered.set()
        assert self.release.wait(20)
        return super().embed_passages(texts)


@pytest.mark.anyio
async def test_a_query_never_waits_for_the_indexers_batch() -> None:
    main, indexer = SlowEmbedder(), HeldEmbedder()
    service = EmbeddingService(
        main, make_indexer=lambda: indexer, batch_size=8, borrow_seconds=0.0, borrow_quiet_s=0.0
    )
    texts = [f"backlog text {i}" for i in range(40)]
    result: list[Matrix] = []

    async def backlog() -> None:
        result.append(await service.embed_passages(texts))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(backlog)
        try:
            with anyio.fail_after(10):
                await anyio.to_thread.run_sync(indexer.entered.wait)
                query = await service.embed_query("urgent question")  # answered while the batch is held
            assert indexer.calls == [] and query.shape == (32,)  # the indexer's first batch is still running
        finally:
            indexer.release.set()
    assert np.array_equal(result[0], HashingEmbedder(dim=32).embed_passages(texts))  # rows in order
    borrowed = [texts for kind, texts in main.calls if kind == "passage"]
    assert borrowed and all(len(chunk) == 1 for chunk in borrowed)  # the query model helped, in short jobs
    assert sum(len(chunk) for _, chunk in indexer.calls) + len(borrowed) == len(texts)


@pytest.mark.anyio
async def test_an_indexer_that_cannot_load_leaves_the_work_to_the_query_model() -> None:
    main, broken = SlowEmbedder(), SlowEmbedder(fail=True)
    service = EmbeddingService(main, make_indexer=lambda: broken, index_min=2)
    texts = [f"text {i}" for i in range(6)]
    matrix = await service.embed_passages(texts)
    assert np.array_equal(matrix, HashingEmbedder(dim=32).embed_passages(texts))
    assert sum(len(chunk) for kind, chunk in main.calls if kind == "passage") == len(texts)
    assert broken.calls == []


@pytest.mark.anyio
@pytest.mark.parametrize("other", ["same", "another model"])
async def test_the_indexer_must_be_another_instance_of_the_same_model(other: str) -> None:
    embedder = HashingEmbedder()
    made = embedder if other == "same" else HashingEmbedder(dim=64)
    service = EmbeddingService(embedder, make_indexer=lambda: made, index_min=1)
    texts = ["one text", "another text"]
    assert np.array_equal(await service.embed_passages(texts), embedder.embed_passages(texts))
    assert service.indexer is None  # refused: the query model did the work


@pytest.mark.anyio
async def test_a_small_call_shares_the_query_model_and_an_idle_indexer_is_dropped() -> None:
    made: list[SlowEmbedder] = []

    def make() -> SlowEmbedder:
        made.append(SlowEmbedder())
        return made[-1]

    service = EmbeddingService(SlowEmbedder(), make_indexer=make, index_min=4, index_idle_s=0.0)
    await service.embed_passages(["a store", "another"])  # below index_min: no second model
    assert made == [] and service.indexer is None
    await service.embed_passages([f"backlog {i}" for i in range(8)])
    assert len(made) == 1 and service.indexer is made[0]
    assert service.trim() and service.indexer is None  # idle: its memory is given back
    assert not service.trim()


@pytest.mark.anyio
async def test_a_fast_model_indexes_on_its_own_thread_only() -> None:
    """A model faster than `borrow_min_item_s` a passage is not helped by the query model (in
    numpy it holds the GIL for much of its work: a second thread contends rather than helps)."""
    main = SlowEmbedder()
    service = EmbeddingService(main, make_indexer=SlowEmbedder, index_min=2, borrow_min_item_s=0.5)
    texts = [f"text {i}" for i in range(40)]
    await service.embed_passages(texts)  # the first backlog measures the indexer's speed
    main.calls.clear()
    assert np.array_equal(await service.embed_passages(texts), HashingEmbedder(dim=32).embed_passages(texts))
    assert main.calls == []


@pytest.mark.anyio
async def test_while_searches_come_the_query_model_is_left_to_them() -> None:
    """Searches come in bursts: for `borrow_quiet_s` after a query, a backlog is embedded by
    the indexer alone, and the query model stays free for the next search."""
    main = SlowEmbedder()
    service = EmbeddingService(main, make_indexer=SlowEmbedder, index_min=2, borrow_quiet_s=60.0)
    await service.embed_query("a search")
    main.calls.clear()
    texts = [f"text {i}" for i in range(40)]
    assert np.array_equal(await service.embed_passages(texts), HashingEmbedder(dim=32).embed_passages(texts))
    assert main.calls == []


class HeldQueries(SlowEmbedder):
    """SlowEmbedder whose query inferences block until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        assert self.release.wait(20)
        return super().embed_queries(texts)


@pytest.mark.anyio
async def test_no_indexer_job_starts_beside_a_query() -> None:
    main, indexer = HeldQueries(), SlowEmbedder()
    service = EmbeddingService(main, make_indexer=lambda: indexer, index_min=2)
    texts = [f"text {i}" for i in range(10)]
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(service.embed_query, "a slow search")
        try:
            with anyio.fail_after(10):
                while service.queue_depth == 0:  # the query is admitted
                    await anyio.sleep(0.01)
                tasks.start_soon(service.embed_passages, texts)
                while service._no_queries is None:  # the indexer waits for the query to end
                    await anyio.sleep(0.01)
            assert indexer.calls == []
        finally:
            main.release.set()
    assert sum(len(chunk) for _, chunk in indexer.calls) == len(texts)


class PreparingEmbedder(SlowEmbedder):
    """Builds something for passages when asked (as e5 builds its passages' graph)."""

    def __init__(self, service_gate: list[EmbeddingService]) -> None:
        super().__init__()
        self.gate_busy_while_preparing: list[bool] = []
        self.service = service_gate

    def prepare_passages(self) -> None:
        self.calls.append(("prepare", ()))
        self.gate_busy_while_preparing.append(self.service[0]._gate.busy)


@pytest.mark.anyio
async def test_what_passages_need_is_built_before_the_inference_slot_is_taken() -> None:
    """A search must not wait in the slot while e5 builds its passages' graph: the service asks
    the embedder to prepare it first, outside the slot, then embeds."""
    holder: list[EmbeddingService] = []
    embedder = PreparingEmbedder(holder)
    service = EmbeddingService(embedder)
    holder.append(service)
    await service.embed_passages(["one", "two"])
    kinds = [kind for kind, _ in embedder.calls]
    assert kinds[0] == "prepare" and "passage" in kinds
    assert embedder.gate_busy_while_preparing == [False]
