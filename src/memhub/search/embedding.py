"""Runs one embedder off the event loop: one inference at a time, queries before passages.

The models are single-threaded, so the service never runs two inferences at once. Work goes
to a worker thread (`anyio.to_thread.run_sync`) through a gate that admits one job at a
time and, when several wait, admits search queries before indexing work. Passages are
embedded in small chunks, so a query waits for at most one chunk of a long backfill.

The model loads in the background (`start_loading`), so the server starts at once; until it
is `ready`, searches run on text alone (the engine checks `ready`, it never waits here). A read
that needs vectors may wait a bounded time for the load (`wait_ready`), then says whether it
ran without them (search/backfill.py, `VectorBackfill.readiness`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TypeVar

import anyio
import numpy as np

from memhub.search.embedders.base import Embedder, EmbedderUnavailable, Matrix

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

    def _release(self) -> None:
        for queue in self._waiting:
            if queue:
                queue.popleft().set()  # stays busy: the slot passes to that waiter
                return
        self._busy = False


class EmbeddingService:
    """One embedder behind a single-inference gate. Create one per process and share it."""

    def __init__(self, embedder: Embedder, *, chunk_size: int = 4, chunk_chars: int = 2000) -> None:
        if chunk_size < 1 or chunk_chars < 1:
            raise ValueError("chunk_size and chunk_chars must be at least 1")
        self.embedder = embedder
        self.chunk_size = chunk_size  # at most this many passages per inference job...
        self.chunk_chars = chunk_chars  # ...and about this many characters (a query waits one job at most)
        self._gate = _PriorityGate(2)
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

    def _queries(self, texts: Sequence[str]) -> Matrix:
        self._ensure_loaded()
        return self._checked(self.embedder.embed_queries(texts), len(texts))

    def _checked(self, matrix: Matrix, rows: int) -> Matrix:
        out = np.asarray(matrix, dtype=np.float32)
        if out.shape != (rows, self.dim):
            raise ValueError(f"embedder {self.id} returned shape {out.shape}, expected {(rows, self.dim)}")
        return out

    async def embed_passages(self, texts: Sequence[str]) -> Matrix:
        """float32 (len(texts), dim). Loads the model first if needed (raises EmbedderUnavailable)."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts: list[Matrix] = []
        for chunk in self._chunks(items):
            parts.append(await self._run(PASSAGE, partial(self._passages, chunk)))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

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
        """float32 (dim,), admitted ahead of waiting passage chunks."""
        matrix = await self._run(QUERY, partial(self._queries, [text]))
        row: Matrix = matrix[0]
        return row
