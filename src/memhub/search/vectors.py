"""Cosine search over one embedder's vectors, held in process as a numpy matrix.

The index follows the store's vector change feed (`vector_changes`), so items embedded by
this process, by the backfill, or by another process sharing the database file all appear
after the next `refresh()`. Rows are unit length, so cosine is one matrix-vector product.

Up to `approx_min` rows the scan is exact (10k x 896 float32: ~2.5 ms). Past it, the scan is
memory-bandwidth bound (100k x 896: ~25 ms), so the index also keeps a short sketch of each
row (`search/sketch.py`: PCA, `sketch_dims` floats), ranks every row by its sketch, and scores
the best `rerank_share` of them (at least `rerank_min`) exactly. Results always carry exact
cosines; the projection is refitted whenever the index has doubled since the last fit.

Layout: `matrix[:count]` holds the live rows, `sketch[:count]` their sketches and
`ids[:count]` their item ids; `pos` maps item id -> row. A delete moves the last row into
the hole (swap-remove), capacity doubles when full. A lock guards the arrays; a second lock
serialises refreshes, so the database read runs outside the search lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memhub.search.sketch import Projection
from memhub.search.vector_search import Allowed
from memhub.store.base import VectorChange

log = logging.getLogger(__name__)

APPROX_MIN = 30_000  # rows before searches take the sketch pass
SKETCH_DIMS = 128
RERANK_SHARE = 0.02  # rows scored exactly after the sketch pass, as a share of the index...
RERANK_MIN = 1_000  # ...but never fewer than this many


class VectorFeed(Protocol):
    """The part of `Store` the index needs."""

    def vector_changes(self, embedder: str, after_seq: int) -> tuple[int, list[VectorChange]]: ...


class VectorIndex:
    """The numpy `VectorSearch` (search/vector_search.py) of the embedded SQLite store."""

    def __init__(
        self,
        feed: VectorFeed,
        embedder_id: str,
        dim: int,
        *,
        initial_capacity: int = 1024,
        approx_min: int = APPROX_MIN,
        sketch_dims: int = SKETCH_DIMS,
        rerank_share: float = RERANK_SHARE,
        rerank_min: int = RERANK_MIN,
    ) -> None:
        if dim < 1:
            raise ValueError("dim must be positive")
        if approx_min < 2 or sketch_dims < 1 or not 0.0 < rerank_share <= 1.0 or rerank_min < 1:
            raise ValueError("approx_min >= 2, sketch_dims >= 1, 0 < rerank_share <= 1, rerank_min >= 1")
        self.approx_min = approx_min
        self.sketch_dims = min(sketch_dims, dim)
        self.rerank_share = rerank_share
        self.rerank_min = rerank_min
        self._projection: Projection | None = None
        self._fitted_at = 0  # rows in the index when the projection was fitted
        self._sketch: npt.NDArray[np.float32] = np.zeros((0, self.sketch_dims), dtype=np.float32)
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

    def size(self) -> int:
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
            self._drop_sketch()

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
                self._maybe_fit()  # outside the search lock: searches go on meanwhile
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
        positions: list[int] = []
        for (item_id, _), row in zip(puts, rows, strict=True):
            position = self._pos.get(item_id)
            if position is None:
                position = self._count
                self._count += 1
                self._pos[item_id] = position
                self._ids[position] = item_id
            self._matrix[position] = row
            positions.append(position)
        if self._projection is not None:
            self._sketch[positions] = self._projection.rows(rows)

    def _drop_sketch(self) -> None:
        """Searches scan exactly again (call with `_lock` held)."""
        self._projection, self._fitted_at = None, 0
        self._sketch = np.zeros((0, self.sketch_dims), dtype=np.float32)

    def _maybe_fit(self) -> None:
        """Fit the sketch projection once the index is large, again each time it doubles, and
        drop it when the index shrinks well below `approx_min` (a reindex empties it).

        Called with `_refresh_lock` held: only refreshes change the arrays, so they can be
        read here without `_lock` while searches read them too; the swap takes `_lock`.
        """
        count = self._count
        if count < self.approx_min // 2 and self._projection is not None:
            with self._lock:
                self._drop_sketch()
            return
        if count < self.approx_min or (self._projection is not None and count < 2 * self._fitted_at):
            return
        started = time.perf_counter()
        matrix = self._matrix  # _reserve replaces the array, never resizes it in place
        projection = Projection.fit(matrix[:count], self.sketch_dims)
        sketch = np.zeros((len(matrix), projection.dims), dtype=np.float32)
        for start in range(0, count, 16_384):
            end = min(count, start + 16_384)
            sketch[start:end] = projection.rows(matrix[start:end])
        with self._lock:
            self._projection, self._sketch, self._fitted_at = projection, sketch, count
        log.info(
            "vector index %s: sketch of %d dims fitted over %d rows in %.0f ms",
            self.embedder_id,
            projection.dims,
            count,
            (time.perf_counter() - started) * 1000,
        )

    def _remove(self, item_id: int) -> None:
        position = self._pos.pop(item_id, None)
        if position is None:
            return
        last = self._count - 1
        if position != last:
            moved = int(self._ids[last])
            self._matrix[position] = self._matrix[last]
            if self._projection is not None:
                self._sketch[position] = self._sketch[last]
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
        if self._projection is not None:
            sketch = np.zeros((capacity, self._sketch.shape[1]), dtype=np.float32)
            sketch[: self._count] = self._sketch[: self._count]
            self._sketch = sketch
        self._matrix, self._ids = matrix, ids

    # -- search ---------------------------------------------------------------------------

    def search(
        self, query_vec: npt.ArrayLike, k: int, allowed: Allowed | None = None
    ) -> list[tuple[int, float]]:
        """The `k` best (item id, cosine) pairs, best first (ties by id), among items `allowed` admits.

        `allowed(ids)` returns the subset of `ids` the caller may see (e.g. the store's
        visibility filter). Candidates are taken best first, 2k at first, widening x4
        until k pass or every row has been offered. On a sketched index the candidates come
        from the rows the sketch pass kept; should those run out before k pass the filter,
        the search starts again over every row, exactly.
        """
        query = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query has {query.shape[0]} dimensions, the index {self.dim}")
        if k <= 0:
            return []
        sketched = None
        with self._lock:
            count = self._count
            if count == 0:
                return []
            keep = max(self.rerank_min, int(count * self.rerank_share), 8 * k)
            if self._projection is not None and count >= self.approx_min and keep < count:
                rough = self._sketch[:count] @ self._projection.query(query)
                rows = np.argpartition(rough, count - keep)[count - keep :]
                sketched = self._matrix[rows] @ query, self._ids[rows]  # fancy indexing: copies
        if sketched is not None:
            hits = self._best(*sketched, k, allowed, complete=False)
            if hits is not None:
                return hits
        with self._lock:
            scores = self._matrix[: self._count] @ query  # a fresh array: a consistent snapshot
            ids = self._ids[: self._count].copy()
        return self._best(scores, ids, k, allowed, complete=True) or []

    def _best(
        self,
        scores: npt.NDArray[np.float32],
        ids: npt.NDArray[np.int64],
        k: int,
        allowed: Allowed | None,
        *,
        complete: bool,
    ) -> list[tuple[int, float]] | None:
        """The k best of these candidates that `allowed` admits; None when fewer than k pass
        and the candidates are not `complete` (every row of the index)."""
        hits: list[tuple[int, float]] = []
        offered = 0
        count = len(scores)
        pool = min(count, 2 * k if allowed is not None else k)
        while True:
            order = self._top(scores, ids, pool)[offered:]
            candidates = [int(i) for i in ids[order]]
            passed = allowed(candidates) if allowed is not None else None
            for item_id, index in zip(candidates, order, strict=True):
                if passed is None or item_id in passed:
                    hits.append((item_id, float(scores[index])))
            offered = pool
            if len(hits) >= k:
                return hits[:k]
            if pool >= count:
                return hits if complete else None
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
