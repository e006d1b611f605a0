"""Exact cosine search over one embedder's vectors, held in process as a numpy matrix.

The index follows the store's vector change feed (`vector_changes`), so items embedded by
this process, by the backfill, or by another process sharing the database file all appear
after the next `refresh()`. Rows are unit length, so cosine is one matrix-vector product;
100k x 384 takes a few milliseconds, well within budget, with no approximation to tune.

Layout: `matrix[:count]` holds the live rows and `ids[:count]` their item ids; `pos` maps
item id -> row. A delete moves the last row into the hole (swap-remove), capacity doubles
when full. A lock guards the arrays; a second lock serialises refreshes, so the database
read runs outside the search lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memhub.store.base import VectorChange

log = logging.getLogger(__name__)

Allowed = Callable[[list[int]], set[int]]


class VectorFeed(Protocol):
    """The part of `Store` the index needs."""

    def vector_changes(self, embedder: str, after_seq: int) -> tuple[int, list[VectorChange]]: ...


class VectorIndex:
    def __init__(self, feed: VectorFeed, embedder_id: str, dim: int, *, initial_capacity: int = 1024) -> None:
        if dim < 1:
            raise ValueError("dim must be positive")
        self.feed = feed
        self.embedder_id = embedder_id
        self.dim = dim
        self.seq = 0  # high-water mark of the change feed applied so far
        self.last_refresh_ms = 0.0
        self._matrix = np.zeros((max(1, initial_capacity), dim), dtype=np.float32)
        self._ids = np.zeros(max(1, initial_capacity), dtype=np.int64)
        self._pos: dict[int, int] = {}
        self._count = 0
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._pos

    @property
    def capacity(self) -> int:
        return len(self._ids)

    # -- maintenance ----------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything and reload from the feed on the next refresh (after a restore)."""
        with self._refresh_lock, self._lock:
            self.seq = 0
            self._pos.clear()
            self._count = 0

    def refresh(self) -> int:
        """Apply the change feed since the last refresh; returns how many changes were applied.

        One indexed query when nothing changed. Safe to call from several threads.
        """
        with self._refresh_lock:
            started = time.perf_counter()
            high, changes = self.feed.vector_changes(self.embedder_id, self.seq)
            if changes:
                with self._lock:
                    self._apply(changes)
            self.seq = max(self.seq, high)
            self.last_refresh_ms = (time.perf_counter() - started) * 1000
            if len(changes) > 1000:
                log.info(
                    "vector index %s: applied %d changes in %.0f ms (%d rows)",
                    self.embedder_id,
                    len(changes),
                    self.last_refresh_ms,
                    self._count,
                )
            return len(changes)

    def _apply(self, changes: Sequence[VectorChange]) -> None:
        puts: list[tuple[int, bytes]] = []
        for change in changes:
            if change.vec is not None and len(change.vec) == self.dim * 4:
                puts.append((change.item_id, change.vec))
            else:
                if change.vec is not None:
                    log.warning(
                        "vector of item %d under %s has %d bytes, expected %d; ignored",
                        change.item_id,
                        self.embedder_id,
                        len(change.vec),
                        self.dim * 4,
                    )
                self._remove(change.item_id)
        if not puts:
            return
        rows = np.frombuffer(b"".join(vec for _, vec in puts), dtype="<f4").reshape(len(puts), self.dim)
        rows = rows.astype(np.float32)  # native order, writable copy
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        np.divide(rows, norms, out=rows, where=norms > 0)  # tolerate writers that did not normalise
        self._reserve(self._count + len(puts))
        for (item_id, _), row in zip(puts, rows, strict=True):
            position = self._pos.get(item_id)
            if position is None:
                position = self._count
                self._count += 1
                self._pos[item_id] = position
                self._ids[position] = item_id
            self._matrix[position] = row

    def _remove(self, item_id: int) -> None:
        position = self._pos.pop(item_id, None)
        if position is None:
            return
        last = self._count - 1
        if position != last:
            moved = int(self._ids[last])
            self._matrix[position] = self._matrix[last]
            self._ids[position] = moved
            self._pos[moved] = position
        self._count = last

    def _reserve(self, needed: int) -> None:
        capacity = len(self._ids)
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        matrix = np.zeros((capacity, self.dim), dtype=np.float32)
        matrix[: self._count] = self._matrix[: self._count]
        ids = np.zeros(capacity, dtype=np.int64)
        ids[: self._count] = self._ids[: self._count]
        self._matrix, self._ids = matrix, ids

    # -- search ---------------------------------------------------------------------------

    def search(
        self, query_vec: npt.ArrayLike, k: int, allowed: Allowed | None = None
    ) -> list[tuple[int, float]]:
        """The `k` best (item id, cosine) pairs, best first (ties by id), among items `allowed` admits.

        `allowed(ids)` returns the subset of `ids` the caller may see (e.g. the store's
        visibility filter). Candidates are taken best first, 4k at first, widening x4
        until k pass or every row has been offered.
        """
        query = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query has {query.shape[0]} dimensions, the index {self.dim}")
        if k <= 0:
            return []
        with self._lock:
            count = self._count
            if count == 0:
                return []
            scores = self._matrix[:count] @ query  # a fresh array: a consistent snapshot
            ids = self._ids[:count].copy()
        hits: list[tuple[int, float]] = []
        offered = 0
        pool = min(count, 4 * k if allowed is not None else k)
        while True:
            order = self._top(scores, ids, pool)[offered:]
            candidates = [int(i) for i in ids[order]]
            keep = allowed(candidates) if allowed is not None else None
            for item_id, index in zip(candidates, order, strict=True):
                if keep is None or item_id in keep:
                    hits.append((item_id, float(scores[index])))
            offered = pool
            if len(hits) >= k or pool >= count:
                return hits[:k]
            pool = min(count, pool * 4)

    @staticmethod
    def _top(scores: npt.NDArray[np.float32], ids: npt.NDArray[np.int64], n: int) -> npt.NDArray[np.intp]:
        """Row indices of the `n` best scores, sorted by score desc then item id asc."""
        if n < len(scores):
            # every row scoring at least the n-th best: ties at the cut are resolved by id below
            threshold = np.partition(scores, len(scores) - n)[len(scores) - n]
            index = np.flatnonzero(scores >= threshold)
        else:
            index = np.arange(len(scores))
        order = np.lexsort((ids[index], -scores[index]))
        return index[order][:n]
