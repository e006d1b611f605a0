"""Cosine search over one embedder's vectors, held in process as an int8 matrix.

The index follows the store's vector change feed (`vector_changes`, read in pages of
`FEED_PAGE`), so items embedded by this process, by the backfill, or by another process
sharing the database all appear after the next `refresh()`.

Rows are made unit length and kept quantised: each row as int8 codes with one float32 scale
(`row ~ scale * codes`, scale = max |coordinate| / 127), a quarter of float32's memory
(100k x 896: 86 MiB instead of 342). Scores from the codes are off by ~3e-4 (one standard
deviation) — more than the gap between neighbours in a crowded region — so they only choose
candidates: the best `k + rescore_extra` that the caller may see are rescored exactly from the
float32 vectors in the store (`Tx.get_vector`, one read transaction) and ranked by those
cosines. A scan of every row dequantises blocks of `SCAN_ROWS` rows that stay in cache; it
reads a quarter of the bytes and is faster than a float32 scan was.

Up to `approx_min` rows every row is scored. Past it, the index also keeps a short sketch of
each row (`search/sketch.py`: PCA, `sketch_dims` coordinates kept as int16 codes with a
scale per row), and a search ranks every row by its sketch, and scores the best
`rerank_share` of them (at least `rerank_min`) from the codes before the exact rescoring. A
batch of queries (`search_many`) scores every row for a group of them at once up to
`batch_approx_min` rows, so between the two sizes a batch's hits are those of a scan of every
row, which a search alone matches but for a rare row its sketch pass did not keep. The
projection is refitted whenever the index has doubled since the last fit.

Layout: `codes[:count]`, `scales[:count]`, `sketch[:count]`, `sketch_scales[:count]` and
`ids[:count]` hold the live rows; `pos` maps item id -> row. A delete moves the last row into
the hole (swap-remove), capacity doubles when full. A lock guards the arrays; a second lock
serialises refreshes, so the database read runs outside the search lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memhub.core.memory import release_free_memory
from memhub.search import sketch as sketches
from memhub.search.sketch import FIT_SAMPLE, Projection
from memhub.search.vector_search import Allowed, Finish, VisibleTo, remembered
from memhub.store.base import VectorChange

log = logging.getLogger(__name__)

APPROX_MIN = 8_000  # rows before a search takes the sketch pass (past ~3,500 it is the faster one at
# the engine's k; 8,000: ~1 ms less a search at 10k, the same results, docs/benchmarks.md)
BATCH_APPROX_MIN = 30_000  # rows before a batch of queries does: below, batches keep the scan of
# every row they had (for full groups at 8-10k rows and k 200: 0.2-0.5 ms a query against 0.6-0.8
# for a sketch pass each; smaller groups and 10-30k rows not measured)
SKETCH_DIMS = 128
RERANK_SHARE = 0.02  # rows scored from the codes after the sketch pass, as a share of the index...
RERANK_MIN = 1_000  # ...but never fewer than this many
RESCORE_EXTRA = 20  # candidates rescored exactly beyond the k asked for...
RESCORE_MAX = 60  # ...but never more than this many (read from the store in one query)
FEED_PAGE = 4_096  # changes read from the feed at a time
SCAN_ROWS = 1_024  # rows dequantised at a time by a scan of every row
GATHER_ROWS = 256  # kept rows gathered and dequantised at a time after the sketch pass
SCAN_CELLS = 1 << 17  # scores one scan of several queries computes at most (holds the lock ~3-8 ms)

Floats = npt.NDArray[np.float32]
Candidates = Callable[[Allowed | None], list[tuple[int, float]]]  # a prepared search's best, before rescoring


class VectorReader(Protocol):
    """The part of a read transaction the exact rescoring needs."""

    def get_vectors(self, item_ids: Sequence[int], embedder: str) -> dict[int, bytes]: ...


class VectorFeed(Protocol):
    """The part of `Store` the index needs."""

    def vector_changes(
        self, embedder: str, after_seq: int, limit: int | None = None
    ) -> tuple[int, list[VectorChange]]: ...

    def transaction(self, *, write: bool) -> AbstractContextManager[VectorReader]: ...


def quantise(rows: Floats) -> tuple[npt.NDArray[np.int8], Floats]:
    """int8 codes and per-row scales with `rows ~ scales[:, None] * codes` (zero rows: scale 0)."""
    scales = (np.abs(rows).max(axis=1) / 127.0).astype(np.float32)
    inverse = np.divide(1.0, scales, out=np.zeros_like(scales), where=scales > 0)
    codes = np.rint(rows * inverse[:, None]).astype(np.int8)
    return codes, scales


class VectorIndex:
    """The numpy `VectorSearch` (search/vector_search.py) of the embedded store."""

    def __init__(
        self,
        feed: VectorFeed,
        embedder_id: str,
        dim: int,
        *,
        initial_capacity: int = 1024,
        approx_min: int = APPROX_MIN,
        batch_approx_min: int = BATCH_APPROX_MIN,
        sketch_dims: int = SKETCH_DIMS,
        rerank_share: float = RERANK_SHARE,
        rerank_min: int = RERANK_MIN,
        rescore_extra: int = RESCORE_EXTRA,
    ) -> None:
        if dim < 1:
            raise ValueError("dim must be positive")
        if approx_min < 2 or sketch_dims < 1 or not 0.0 < rerank_share <= 1.0 or rerank_min < 1:
            raise ValueError("approx_min >= 2, sketch_dims >= 1, 0 < rerank_share <= 1, rerank_min >= 1")
        if rescore_extra < 0:
            raise ValueError("rescore_extra >= 0")
        self.approx_min = approx_min
        self.batch_approx_min = batch_approx_min
        self.sketch_dims = min(sketch_dims, dim)
        self.rerank_share = rerank_share
        self.rerank_min = rerank_min
        self.rescore_extra = rescore_extra
        self._projection: Projection | None = None
        self._fitted_at = 0  # rows in the index when the projection was fitted
        self._sketch: sketches.Codes = np.zeros((0, self.sketch_dims), dtype=np.int16)
        self._sketch_scales: Floats = np.zeros(0, dtype=np.float32)
        self.feed = feed
        self.embedder_id = embedder_id
        self.dim = dim
        self.seq = 0  # high-water mark of the change feed applied so far
        self.last_refresh_ms = 0.0
        capacity = max(1, initial_capacity)
        self._codes = np.zeros((capacity, dim), dtype=np.int8)
        self._scales = np.zeros(capacity, dtype=np.float32)
        self._ids = np.zeros(capacity, dtype=np.int64)
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

        One indexed query when nothing changed. The feed is read a page (`FEED_PAGE` log
        entries) at a time until a page comes back empty, so a first load never holds more than
        a page of vectors as bytes. Safe to call from several threads.
        """
        with self._refresh_lock:
            started = time.perf_counter()
            applied = 0
            while True:
                high, changes = self.feed.vector_changes(self.embedder_id, self.seq, FEED_PAGE)
                if changes:
                    with self._lock:
                        self._apply(changes)
                self.seq = max(self.seq, high)
                applied += len(changes)
                if not changes:
                    break
            if applied:
                self._maybe_fit()  # outside the search lock: searches go on meanwhile
            self.last_refresh_ms = (time.perf_counter() - started) * 1000
            if applied > 1000:
                log.info(
                    "vector index %s: applied %d changes in %.0f ms (%d rows)",
                    self.embedder_id,
                    applied,
                    self.last_refresh_ms,
                    self._count,
                )
        if applied > FEED_PAGE:  # after the lock: other refreshes (searches) need not wait for it
            release_free_memory()  # the feed's pages and the fit's temporaries (core/memory.py)
        return applied

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
        broken = np.flatnonzero(~np.isfinite(rows).all(axis=1)).tolist()
        if broken:
            log.warning(
                "%d vector(s) under %s hold NaN or infinity and count as zero vectors (items %s)",
                len(broken),
                self.embedder_id,
                ", ".join(str(puts[i][0]) for i in broken[:5]) + (", …" if len(broken) > 5 else ""),
            )
        rows = _unit(rows)
        codes, scales = quantise(rows)
        self._reserve(self._count + len(puts))
        positions: list[int] = []
        for item_id, _ in puts:
            position = self._pos.get(item_id)
            if position is None:
                position = self._count
                self._count += 1
                self._pos[item_id] = position
                self._ids[position] = item_id
            positions.append(position)
        self._codes[positions] = codes  # the feed gives one change per item: no repeats
        self._scales[positions] = scales
        if self._projection is not None:
            self._sketch[positions], self._sketch_scales[positions] = sketches.quantise(
                self._projection.rows(rows)
            )

    def _drop_sketch(self) -> None:
        """Searches scan every row again (call with `_lock` held)."""
        self._projection, self._fitted_at = None, 0
        self._sketch = np.zeros((0, self.sketch_dims), dtype=np.int16)
        self._sketch_scales = np.zeros(0, dtype=np.float32)

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
        codes, scales = self._codes, self._scales  # _reserve replaces the arrays, never resizes them
        sample = np.arange(count)
        if count > FIT_SAMPLE:
            sample = np.sort(np.random.default_rng(0).choice(count, FIT_SAMPLE, replace=False))
        projection = Projection.fit(_rows(codes, scales, sample), self.sketch_dims)
        sketch = np.zeros((len(codes), projection.dims), dtype=np.int16)
        sketch_scales = np.zeros(len(codes), dtype=np.float32)
        for start in range(0, count, 16_384):
            block = np.arange(start, min(count, start + 16_384))
            sketch[block], sketch_scales[block] = sketches.quantise(
                projection.rows(_rows(codes, scales, block))
            )
        with self._lock:
            self._projection, self._fitted_at = projection, count
            self._sketch, self._sketch_scales = sketch, sketch_scales
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
            self._codes[position] = self._codes[last]
            self._scales[position] = self._scales[last]
            if self._projection is not None:
                self._sketch[position] = self._sketch[last]
                self._sketch_scales[position] = self._sketch_scales[last]
            self._ids[position] = moved
            self._pos[moved] = position
        self._count = last

    def _reserve(self, needed: int) -> None:
        capacity = len(self._ids)
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        count = self._count
        codes = np.zeros((capacity, self.dim), dtype=np.int8)
        codes[:count] = self._codes[:count]
        scales = np.zeros(capacity, dtype=np.float32)
        scales[:count] = self._scales[:count]
        ids = np.zeros(capacity, dtype=np.int64)
        ids[:count] = self._ids[:count]
        if self._projection is not None:
            sketch = np.zeros((capacity, self._sketch.shape[1]), dtype=np.int16)
            sketch[:count] = self._sketch[:count]
            sketch_scales = np.zeros(capacity, dtype=np.float32)
            sketch_scales[:count] = self._sketch_scales[:count]
            self._sketch, self._sketch_scales = sketch, sketch_scales
        self._codes, self._scales, self._ids = codes, scales, ids

    # -- search ---------------------------------------------------------------------------

    def search(
        self, query_vec: npt.ArrayLike, k: int, allowed: Allowed | None = None
    ) -> list[tuple[int, float]]:
        """The `k` best (item id, cosine) pairs, best first (ties by id), among items `allowed` admits.

        `allowed(ids)` returns the subset of `ids` the caller may see (e.g. the store's
        visibility filter). Candidates are taken best first by their scores from the codes,
        5/4 of the `k + rescore_extra` wanted at first (usually one round), widening x4 until
        that many pass or every row has been offered; those that passed are rescored exactly.
        On a sketched index the candidates come from the rows the sketch pass kept; should
        fewer than k of those pass the filter, the search starts again over every row.
        """
        return self.prepare(query_vec, k)(allowed)

    def search_many(
        self, asks: Sequence[tuple[npt.ArrayLike, Allowed | None]], k: int
    ) -> list[list[tuple[int, float]]]:
        """`search` for each (query, allowed), the exact rescoring of them all from one read of
        the store (a batch of new memories linked by the backfill shares most neighbours).
        From `approx_min` to `batch_approx_min` rows, two or more queries scan every row, where
        `search` takes the sketch pass: their hits are those of the scan (module docstring)."""
        prepared = self._prepare_many([query_vec for query_vec, _ in asks], k)
        pending = [
            (query, candidates(allowed))
            for (query, candidates), (_, allowed) in zip(prepared, asks, strict=True)
        ]
        wanted = sorted({item_id for _, hits in pending for item_id, _ in hits[: self._exact_count(k)]})
        stored = self._stored(wanted)
        return [self._rescore(hits, query, k, stored) for query, hits in pending]

    def prepare(self, query_vec: npt.ArrayLike, k: int) -> Finish:
        """`search` in two steps: the arithmetic now (the sketch pass and the kept rows' scores
        from the codes, or on a small index the scan of every row: numpy, no database), the
        rest (visibility, the exact rescoring, which read the store) when the returned function
        is called: in the transaction `allowed` carries (`VisibleTo.tx`), else in this thread's.
        The search engine runs both on a thread of its own while its keyword side runs in the
        snapshot's thread, the rest in the snapshot's second reader (`Store.read_pair`)."""
        query, candidates = self._prepare(query_vec, k)

        def finish(allowed: Allowed | None) -> list[tuple[int, float]]:
            hits = candidates(allowed)
            exact = [item_id for item_id, _ in hits[: self._exact_count(k)]]
            # in the transaction the visibility rule carries, when it carries one: a search's
            # second reader on another thread (Store.read_pair) rescores in its own snapshot
            reader = allowed.tx if isinstance(allowed, VisibleTo) else None
            return self._rescore(hits, query, k, self._stored(exact, reader))

        return finish

    def _prepare(self, query_vec: npt.ArrayLike, k: int) -> tuple[Floats, Candidates]:
        """The query as a float32 row, and the function that takes the candidates `allowed`
        admits (best first by their scores from the codes) once the arithmetic is done."""
        return self._prepare_many([query_vec], k)[0]

    def _prepare_many(self, query_vecs: Sequence[npt.ArrayLike], k: int) -> list[tuple[Floats, Candidates]]:
        """`_prepare` of each query; on an index small enough to score every row, every row's
        codes are widened once for a group of them (one matrix product instead of one per
        query; groups of SCAN_CELLS // rows queries, so the lock is never held long). A query
        of a group gets the hits a scan of every row gives it alone; past the exact rescoring
        (k > 40) its scores from the codes may differ in the last bits (another order of the
        sums). A sketched index takes the sketch pass for one query from `approx_min` rows,
        for several from `batch_approx_min` (below it a group's scan is the cheaper)."""
        queries = [np.asarray(query_vec, dtype=np.float32).reshape(-1) for query_vec in query_vecs]
        for query in queries:
            if query.shape[0] != self.dim:
                raise ValueError(f"query has {query.shape[0]} dimensions, the index {self.dim}")
        if k <= 0 or not queries:
            return [(query, _nothing) for query in queries]
        prepared: list[tuple[Floats, Candidates]] = []
        sketch_min = self.approx_min if len(queries) == 1 else max(self.approx_min, self.batch_approx_min)
        while len(prepared) < len(queries):
            with self._lock:  # held for one query, or one group of them, at a time: searches go on
                count = self._count
                rest = queries[len(prepared) :]
                if count == 0:
                    prepared.extend((query, _nothing) for query in rest)
                    continue
                keep = max(self.rerank_min, int(count * self.rerank_share), 8 * k)
                projection = self._projection
                if projection is not None and count >= sketch_min and keep < count:
                    query = rest[0]
                    sketched = self._sketched(projection, query, count, keep)
                    prepared.append((query, self._candidates(query, k, sketched, None)))
                    continue
                ids = self._ids[:count].copy()  # a consistent snapshot
                group = rest[: max(1, SCAN_CELLS // count)]
                if len(group) == 1:
                    columns = [self._scan(group[0])]
                else:
                    columns = list(np.ascontiguousarray(self._scan(np.stack(group, axis=1)).T))
            prepared.extend(
                (query, self._candidates(query, k, None, (scores, ids)))
                for query, scores in zip(group, columns, strict=True)
            )
        return prepared

    def _sketched(
        self, projection: Projection, query: Floats, count: int, keep: int
    ) -> tuple[Floats, npt.NDArray[np.int64]]:
        """The `keep` rows the sketch pass ranks best, scored from their codes (call with `_lock` held)."""
        rough = sketches.scores(self._sketch, self._sketch_scales, count, projection.query(query))
        rows = sketches.best_rows(rough, keep)  # in memory order: the gather below reads ahead
        return _scores(self._codes, self._scales, rows, query), self._ids[rows]

    def _candidates(
        self,
        query: Floats,
        k: int,
        sketched: tuple[Floats, npt.NDArray[np.int64]] | None,
        scanned: tuple[Floats, npt.NDArray[np.int64]] | None,
    ) -> Candidates:
        def candidates(allowed: Allowed | None) -> list[tuple[int, float]]:
            if sketched is not None:
                # should the kept rows hold fewer than k visible ones (a viewer who may read a
                # small share of the index), the scan of every row below asks only about the
                # rows the sketch pass did not keep
                allowed = remembered(allowed) if allowed is not None else None
                hits = self._best(*sketched, k, allowed, complete=False)
                if hits is not None:
                    return hits
            every = scanned
            if every is None:  # too few of the sketch pass's rows passed: every row
                with self._lock:
                    every = self._scan(query), self._ids[: self._count].copy()
            return self._best(*every, k, allowed, complete=True) or []

        return candidates

    def _scan(self, query: Floats) -> Floats:
        """Scores of every row from the codes (call with `_lock` held): blocks of `SCAN_ROWS`
        rows are widened to float32 in a buffer that stays in cache, then multiplied. `query`
        a row: (count,); queries as columns (dim, m): (count, m)."""
        count = self._count
        scores = sketches.widened_dot(self._codes, query, count, SCAN_ROWS)
        scores *= self._scales[:count, None] if scores.ndim == 2 else self._scales[:count]
        return scores

    def _best(
        self,
        scores: Floats,
        ids: npt.NDArray[np.int64],
        k: int,
        allowed: Allowed | None,
        *,
        complete: bool,
    ) -> list[tuple[int, float]] | None:
        """Up to `k + rescore_extra` of the best candidates that `allowed` admits, best first;
        None when fewer than k pass and the candidates are not `complete` (every row), or
        when the share of them passing so far says fewer than k would."""
        hits: list[tuple[int, float]] = []
        want = k + self.rescore_extra
        offered = 0
        count = len(scores)
        pool = min(count, want + want // 4 if allowed is not None else want)  # most pass: one round
        while True:
            order = self._top(scores, ids, pool)[offered:]
            candidates = [int(i) for i in ids[order]]
            passed = allowed(candidates) if allowed is not None else None
            for item_id, index in zip(candidates, order, strict=True):
                if passed is None or item_id in passed:
                    hits.append((item_id, float(scores[index])))
            offered = pool
            if len(hits) >= want or pool >= count:
                return hits[:want] if complete or len(hits) >= k else None
            if not complete and len(hits) * count < k * offered:
                return None  # at this share passing, the rest cannot make k: every row at once
            pool = min(count, pool * 4)

    def _exact_count(self, k: int) -> int:
        """How many of a search's best candidates are rescored exactly."""
        return min(k + self.rescore_extra, RESCORE_MAX)

    def _stored(self, item_ids: list[int], reader: VectorReader | None = None) -> dict[int, bytes]:
        """The float32 vectors of `item_ids` in the store: read in `reader`, or in one read
        transaction (this thread's, when it is in one)."""
        if not item_ids:
            return {}
        if reader is not None:
            return reader.get_vectors(item_ids, self.embedder_id)
        with self.feed.transaction(write=False) as tx:
            return tx.get_vectors(item_ids, self.embedder_id)

    def _rescore(
        self, hits: list[tuple[int, float]], query: Floats, k: int, stored: dict[int, bytes]
    ) -> list[tuple[int, float]]:
        """The k best of `hits` (best first by their scores from the codes), the first
        `_exact_count(k)` of them rescored exactly from their float32 vectors `stored` (read
        from the store). A hit past that cut, or whose vector is gone since the last refresh,
        keeps its score from the codes (off by ~3e-4 at 896 dims)."""
        if not hits:
            return []
        size = self.dim * 4
        exact = hits[: self._exact_count(k)]
        blobs = [stored.get(item_id) for item_id, _ in exact]
        found = [i for i, blob in enumerate(blobs) if blob is not None and len(blob) == size]
        scores = [score for _, score in hits]
        if found:
            rows = np.frombuffer(b"".join(blobs[i] or b"" for i in found), dtype="<f4").reshape(-1, self.dim)
            for i, score in zip(found, (_unit(rows) @ query).tolist(), strict=True):
                scores[i] = score
        rescored = [(item_id, float(score)) for (item_id, _), score in zip(hits, scores, strict=True)]
        return sorted(rescored, key=lambda hit: (-hit[1], hit[0]))[:k]

    @staticmethod
    def _top(scores: Floats, ids: npt.NDArray[np.int64], n: int) -> npt.NDArray[np.intp]:
        """Row indices of the `n` best scores, sorted by score desc then item id asc."""
        if n < len(scores):
            # every row scoring at least the n-th best: ties at the cut are resolved by id below
            threshold = np.partition(scores, len(scores) - n)[len(scores) - n]
            index = np.flatnonzero(scores >= threshold)
        else:
            index = np.arange(len(scores))
        order = np.lexsort((ids[index], -scores[index]))
        return index[order][:n]


def _nothing(_allowed: Allowed | None) -> list[tuple[int, float]]:
    return []


def _unit(rows: Floats) -> Floats:
    """`rows` scaled to unit length, as a native-order float32 copy (zero rows stay zero:
    this tolerates writers that did not normalise). A row holding NaN or infinity (a damaged
    file, a faulty model) becomes a zero row: it scores 0 and cannot stop the sketch's fit."""
    out = rows.astype(np.float32)
    out[~np.isfinite(out).all(axis=1)] = 0.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def _scores(
    codes: npt.NDArray[np.int8], scales: Floats, index: npt.NDArray[np.intp], query: Floats
) -> Floats:
    """Scores of rows `index` from their codes, gathered `GATHER_ROWS` at a time (one float32
    copy of every kept row was a fresh 7 MB a search at 2,000 rows x 896 dims: four times
    slower, the same values)."""
    out = sketches.widened_dot(codes, query, len(index), GATHER_ROWS, index)
    out *= scales[index]
    return out


def _rows(codes: npt.NDArray[np.int8], scales: Floats, index: npt.NDArray[np.intp]) -> Floats:
    """Rows `index` widened back to float32 (fancy indexing: a copy)."""
    out: Floats = codes[index].astype(np.float32)
    out *= scales[index, None]
    return out
