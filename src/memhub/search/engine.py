"""Hybrid search (BM25 text + vector cosine, fused) and the vector backfill.

`SearchEngine.run` is the one retrieval pipeline (services reach it through
`services/retrieval.retrieve`): in one read snapshot (`Store.read_pair`) it builds the
caller's viewer, runs the text side (FTS5 through the store's visibility filter) on the
snapshot's worker thread and, when the model is ready, the vector side beside it (the query
embedding, then the `VectorSearch` with candidates filtered by the same visibility rule, in a
second transaction of the same snapshot where the store gives one), fuses them and hands the
`Candidates` (search/pipeline.py) to the toolset's rerank in that snapshot. `search` is `run`
without a rerank. It never waits for a model to load: until `EmbeddingService.ready`, results
come from text alone. Database and numpy work run on worker threads, never on the event loop.

`VectorBackfill` (re-exported from `memhub.search.backfill`) gives items their vectors.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import TypeVar

import anyio
import anyio.lowlevel
import numpy as np

from memhub.core.errors import invalid
from memhub.core.models import Boundary, Viewer
from memhub.core.tasks import task_group
from memhub.core.text import search_terms
from memhub.search import calibration
from memhub.search.backfill import VectorBackfill
from memhub.search.embedders.base import EmbedderUnavailable, Matrix
from memhub.search.embedding import EmbeddingService
from memhub.search.explain import Explanation
from memhub.search.fusion import FUSION_METHODS, FusedHit, FusionMethod, fuse_hits
from memhub.search.pipeline import Candidates
from memhub.search.vector_search import Allowed, Finish, VectorSearch, VisibleTo, remembered
from memhub.store.base import Store, Tx, Visibility

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["SearchEngine", "VectorBackfill"]

MAX_K = 1000  # per-side and final result caps
PREPARE_THREADS = 2  # the vector index's arithmetic (numpy, memory-bound): more threads do not help
# the vector sides' threads (the arithmetic, then the database's part in the second reader):
# their own limiter, as many as anyio's default one holds snapshot threads
VECTOR_THREADS = 40
MAX_QUERY_EMBED_CHARS = 2000  # a pasted document as a query: its head carries the meaning


class SearchEngine:
    """Hybrid search over one store. `vector_timeout`: how long a search waits for its query
    embedding (queued behind indexing work, say) before answering from text alone."""

    def __init__(
        self,
        store: Store,
        embedding: EmbeddingService | None,
        vectors: VectorSearch | None,
        *,
        vector_timeout: float = 1.0,
    ) -> None:
        if embedding is not None and vectors is not None and embedding.id != vectors.embedder_id:
            raise ValueError(f"index holds {vectors.embedder_id} vectors but the embedder is {embedding.id}")
        self.store = store
        self.embedding = embedding
        self.vectors = vectors
        self.vector_timeout = vector_timeout
        self.vector_timeouts = 0  # searches answered from text alone because embedding was slow (a metric)
        self._vector_limiter: anyio.CapacityLimiter | None = None  # made in the event loop
        self._arithmetic = threading.BoundedSemaphore(PREPARE_THREADS)

    @property
    def vector_ready(self) -> bool:
        return self.embedding is not None and self.vectors is not None and self.embedding.ready

    def reset_vectors(self) -> None:
        """Forget the vector index's state; it reloads on the next search (after a restore)."""
        if self.vectors is not None:
            self.vectors.reset()

    async def warm(self) -> None:
        """Load the vector index now (the first refresh reads every vector) instead of on first search."""
        if self.vectors is not None:
            await anyio.to_thread.run_sync(self.vectors.refresh)

    async def search(
        self,
        viewer: Viewer,
        query: str,
        *,
        kinds: Sequence[str] = (),
        project_id: int | None = None,
        k_txt: int = 50,
        k_vec: int = 50,
        k_final: int = 10,
        alpha: float = 0.5,
        method: FusionMethod = "linear",
        explain: Explanation | None = None,
    ) -> list[FusedHit]:
        """The best `k_final` items visible to `viewer`, best first: `run` without a rerank."""
        return await self.run(
            query, lambda _tx: viewer, _hits, kinds=kinds, project_id=project_id, k_txt=k_txt,
            k_vec=k_vec, k_final=k_final, alpha=alpha, method=method, explain=explain,
        )  # fmt: skip

    async def run(
        self,
        query: str,
        viewer: Callable[[Tx], Viewer],
        rerank: Callable[[Tx, Candidates], T],
        *,
        kinds: Sequence[str] = (),
        project_id: int | None = None,
        k_txt: int = 50,
        k_vec: int = 50,
        k_final: int = 10,
        alpha: float = 0.5,
        method: FusionMethod = "linear",
        explain: Explanation | None = None,
    ) -> T:
        """The one retrieval pipeline: in ONE read snapshot (`Store.read_pair`), the viewer
        (`viewer(tx)`), the keyword side, the vector side (its query embedding computed
        meanwhile on the event loop's side), the fusion, then the caller's `rerank(tx,
        candidates)` over the same snapshot; returns what the rerank returns.

        With `explain`, what each stage computed is written into it (search/explain.py); the
        ranking is the same."""
        for name, value in (("k_txt", k_txt), ("k_vec", k_vec), ("k_final", k_final)):
            if not 0 <= value <= MAX_K:
                raise invalid(f"{name} must be between 0 and {MAX_K}", **{name: value})
        if method not in FUSION_METHODS:
            raise invalid(f"unknown fusion method {method!r}; expected one of: {', '.join(FUSION_METHODS)}")
        if not 0.0 <= alpha <= 1.0 or math.isnan(alpha):
            raise invalid("alpha must be between 0 and 1", alpha=alpha)
        ask = _Ask(tuple(kinds), project_id, k_txt, k_vec, k_final, alpha, method)
        if explain is not None:
            explain.query, explain.method, explain.alpha = query, method, alpha
        embedding, vectors = self.embedding, self.vectors
        linear = method == "linear"
        searching = bool(query.strip()) and k_final > 0
        wants_text = searching and k_txt > 0 and not (linear and alpha == 1.0)
        wants_vectors = searching and k_vec > 0 and not (linear and alpha == 0.0)
        # not `vectors.size() > 0`: an index another process filled is only read by the search
        with_vectors = wants_vectors and embedding is not None and vectors is not None and embedding.ready
        # tokenised once, here: alone (no vectors) the keyword side cuts CJK runs (`_text_hits`)
        terms = tuple(search_terms(query, split_cjk=not with_vectors)) if wants_text else ()
        pending = _VectorSide()
        loop = anyio.lowlevel.current_token()
        async with task_group() as group:
            if with_vectors and embedding is not None and vectors is not None:
                group.start_soon(self._vector_side, embedding, vectors, query, k_vec, pending)

            def in_snapshot(tx: Tx, second: Tx | None) -> T:
                seen = viewer(tx)
                if second is not None:
                    pending.second = (
                        second,
                        _allowed(self.store, second, seen, ask.kinds, ask.project_id, None),
                    )
                pending.start(loop)
                try:
                    text_hits = self._text_hits(tx, seen, terms, ask, explain) if terms else []
                finally:  # the vector side is done with the second reader before it ends
                    if with_vectors:
                        pending.done.wait()
                vector_hits: list[tuple[int, float]] = []
                if pending.hits is not None:
                    vector_hits = pending.hits
                elif pending.value is not None:
                    vector_hits = self._vector_hits(tx, *pending.value, seen, ask, explain)
                fused = fuse_hits(
                    text_hits, vector_hits, method=method, alpha=alpha, k_final=k_final, explain=explain
                ) if searching else []  # fmt: skip
                if explain is not None and vector_hits and embedding is not None:
                    self._per_model(tx, embedding, fused, explain)
                embedder = embedding.id if with_vectors and embedding is not None else None
                return rerank(tx, Candidates(query, terms, fused, seen, embedder))

            def work() -> T:
                try:
                    if with_vectors and vectors is not None:
                        vectors.refresh()  # its own read of the change feed, before the snapshot
                    # the vector side finishes on a second reader of this snapshot beside the
                    # keyword side, where the store has one to give (with `explain`: here, after)
                    paired = with_vectors and explain is None
                    with self.store.read_pair() if paired else _alone(self.store) as (tx, second):
                        return in_snapshot(tx, second)
                finally:  # whatever happened, the vector side is not left waiting
                    pending.start(loop)

            result = await anyio.to_thread.run_sync(work)
        return result

    async def _vector_side(
        self, embedding: EmbeddingService, vectors: VectorSearch, query: str, k: int, side: _VectorSide
    ) -> None:
        """The vector side's work beside the keyword side: the query's embedding, then (once
        the snapshot's thread has had the index catch up: `side.refreshed`) on a thread of its
        own the index's arithmetic (`VectorSearch.prepare`) and the rest of the search (visibility,
        exact rescoring: `side.hits`) in the snapshot's second reader (`side.second`, from
        `Store.read_pair`, set before `side.refreshed` when the store gave one); otherwise the
        snapshot's thread finishes it (`side.value`). No embedding when the model fails or takes longer than
        `vector_timeout` (queued behind indexing work, say): the search then answers from text
        alone. The snapshot's thread waits for `side.done`, which is always set."""
        try:
            with anyio.move_on_after(self.vector_timeout) as timer:
                query_vec = await embedding.embed_query(query[:MAX_QUERY_EMBED_CHARS])
            if timer.cancelled_caught:
                self.vector_timeouts += 1
                log.info("vector search skipped: no query embedding within %.1f s", self.vector_timeout)
                return

            await side.refreshed.wait()

            def prepared() -> tuple[Finish | None, list[tuple[int, float]] | None]:
                try:
                    with self._arithmetic:
                        finish = vectors.prepare(query_vec, k)
                except ValueError as exc:  # the index refused the query (a dimension it does not hold)
                    log.warning("vector search skipped: %s", exc)
                    return None, None
                if side.second is None:  # set before the vector side is told to start, or never
                    return finish, None
                second, allowed = side.second
                with second.failures():
                    return finish, finish(allowed)

            # Its own threads: a snapshot's thread holds a token of the default limiter while it
            # waits for this, so under 40 searches at once the default limiter would deadlock.
            # A thread here waits for nothing a snapshot's thread holds: the arithmetic's
            # semaphore is held by arithmetic only, the second reader by this search alone.
            if self._vector_limiter is None:
                self._vector_limiter = anyio.CapacityLimiter(VECTOR_THREADS)
            finish, side.hits = await anyio.to_thread.run_sync(prepared, limiter=self._vector_limiter)
            if finish is not None:
                side.value = (query_vec, finish)
        except EmbedderUnavailable as exc:
            log.warning("vector search skipped: %s", exc.message)
        finally:
            side.done.set()

    def _per_model(
        self, tx: Tx, embedding: EmbeddingService, fused: list[FusedHit], explain: Explanation
    ) -> None:
        """Each model's own cosine of the query and every vector hit (explain only): a pair of
        models (search/embedders/combined.py) scores `w * cos_a + (1 - w) * cos_b`."""
        query_vec = explain.query_vec
        if query_vec is None:
            return
        model = embedding.embedder
        first, second = getattr(model, "first", None), getattr(model, "second", None)
        weight = getattr(model, "weight", None)
        ids = [hit.item_id for hit in fused if hit.vector_score is not None]
        # a damaged vector (calibration.stacked) is left out, as the index counts it as zero
        stored, matrix = calibration.stacked(ids, tx.get_vectors(ids, embedding.id), embedding.dim)
        for item_id, vec in zip(stored, matrix, strict=True):
            if first is None or second is None or not isinstance(weight, float):
                explain.models[item_id] = {embedding.id: float(vec @ query_vec)}
                continue
            cut = int(first.dim)
            explain.models[item_id] = {
                str(first.id): float(vec[:cut] @ query_vec[:cut]) / weight,
                str(second.id): float(vec[cut:] @ query_vec[cut:]) / (1.0 - weight),
            }

    def _text_hits(
        self, tx: Tx, viewer: Viewer, terms: Sequence[str], ask: _Ask, explain: Explanation | None
    ) -> list[tuple[int, float]]:
        """BM25 hits. Alone (no vectors) the keyword side must find paraphrases too, so CJK
        runs are cut into content words; beside vectors it is the precise signal and a CJK
        run must appear whole: on bench/data/ja_set.json with e5+use, splitting lowered hit@5
        from 0.838 to 0.796 (weak keyword matches on the wrong memories), while BM25 alone
        rose from 0.176 to 0.366 (Japanese queries 0.017 -> 0.483)."""
        if explain is None:
            return tx.text_search(viewer, terms, ask.kinds, ask.project_id, ask.k_txt)
        # how many hits ranked among these a viewer of every boundary class would read
        explain.terms = list(terms)
        hits, hidden = tx.text_search_hidden(
            viewer, _every_class(viewer), terms, ask.kinds, ask.project_id, ask.k_txt
        )
        explain.hidden["text_by_boundary"] = hidden
        return hits

    def _vector_hits(
        self,
        tx: Tx,
        query_vec: Matrix,
        finish: Finish,
        viewer: Viewer,
        ask: _Ask,
        explain: Explanation | None,
    ) -> list[tuple[int, float]]:
        if explain is not None:
            explain.query_vec = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        return finish(_allowed(self.store, tx, viewer, ask.kinds, ask.project_id, explain))

    async def nearest(
        self,
        viewer: Viewer,
        query_vec: Matrix,
        *,
        k: int,
        kinds: Sequence[str] = (),
        project_id: int | None = None,
    ) -> list[tuple[int, float]]:
        """The `k` visible items whose vectors are closest to `query_vec`: (item id, cosine), best first."""
        found = await self.nearest_many([(viewer, query_vec)], k=k, kinds=kinds, project_id=project_id)
        return found[0]

    async def nearest_many(
        self,
        asks: Sequence[tuple[Viewer, Matrix]],
        *,
        k: int,
        kinds: Sequence[str] = (),
        project_id: int | None = None,
    ) -> list[list[tuple[int, float]]]:
        """`nearest` for each (viewer, vector), in one read transaction on one worker thread:
        a candidate's visibility is read once per viewer (a batch of new memories, linked by
        the backfill, shares most of its neighbours)."""
        if self.vectors is None or k <= 0 or not asks:
            return [[] for _ in asks]
        return await anyio.to_thread.run_sync(
            partial(self._search_index, self.vectors, asks, tuple(kinds), project_id, k)
        )

    def _search_index(
        self,
        index: VectorSearch,
        asks: Sequence[tuple[Viewer, Matrix]],
        kinds: tuple[str, ...],
        project_id: int | None,
        limit: int,
    ) -> list[list[tuple[int, float]]]:
        index.refresh()
        with self.store.transaction(write=False) as tx:
            checks: dict[Viewer, Allowed] = {}
            for viewer, _ in asks:
                if viewer not in checks:
                    checks[viewer] = _allowed(self.store, tx, viewer, kinds, project_id, None, remember=True)
            return index.search_many([(query_vec, checks[viewer]) for viewer, query_vec in asks], limit)


@dataclass(frozen=True, slots=True)
class _Ask:
    kinds: tuple[str, ...]
    project_id: int | None
    k_txt: int
    k_vec: int
    k_final: int
    alpha: float
    method: FusionMethod


class _VectorSide:
    """What a search's snapshot thread and its vector side (`SearchEngine._vector_side`) hand
    each other: `refreshed`, `second` (the visibility rule in the snapshot's second reader, if
    any), then once `done` either `hits` (finished there) or `value` (the query embedding and the
    rest of the prepared search) or neither (text alone). `done` is a thread's event: the
    snapshot's thread waits for it without the event loop's help."""

    def __init__(self) -> None:
        self.refreshed = anyio.Event()  # the index has caught up: its arithmetic may start
        self._started = False
        self.second: tuple[Tx, Allowed] | None = None  # the second reader, the rule in it
        self.hits: list[tuple[int, float]] | None = None
        self.value: tuple[Matrix, Finish] | None = None
        self.done = threading.Event()

    def start(self, loop: anyio.lowlevel.EventLoopToken) -> None:
        """Set `refreshed` from the snapshot's thread, once, without waiting for the event loop."""
        if not self._started:
            self._started = True
            loop.backend_class.run_sync_soon(self.refreshed.set, (), loop.native_token)


@contextmanager
def _alone(store: Store) -> Iterator[tuple[Tx, None]]:
    """`Store.read_pair` without the second transaction."""
    with store.transaction(write=False) as tx:
        yield tx, None


def _hits(_tx: Tx, candidates: Candidates) -> list[FusedHit]:
    return candidates.hits


def _allowed(
    store: Store,
    tx: Tx,
    viewer: Viewer,
    kinds: tuple[str, ...],
    project_id: int | None,
    explain: Explanation | None,
    *,
    remember: bool = False,
) -> Allowed:
    """The vector side's visibility check, in the search's own snapshot: the store's one
    visibility filter over each batch of candidates the index offers. `remember`: the
    verdicts are kept, and an id asked again is not read again (several searches of one
    viewer in one snapshot)."""

    def read(ids: list[int]) -> set[int]:
        return tx.visible_ids(viewer, ids, kinds, project_id)

    visible = remembered(read) if remember else read

    def allowed(ids: list[int]) -> set[int]:
        passed = visible(ids)
        if explain is not None:
            # nearest neighbours a boundary class removed, counts only, within what the
            # viewer may otherwise read: items of other principals are never counted (a
            # count of them would tell a caller what others keep near its query)
            wider = tx.visible_ids(_every_class(viewer), ids, kinds, project_id)
            explain.hidden["vector_by_boundary"] = explain.hidden.get("vector_by_boundary", 0) + len(
                wider - passed
            )
        return passed

    if explain is None:  # the rule travels with it: a search in the database applies it in its query
        return VisibleTo(store, Visibility(viewer, kinds, project_id), allowed, tx)
    return allowed


def _every_class(viewer: Viewer) -> Viewer:
    """The same eyes with every boundary class: only to count what the classes hid."""
    return replace(viewer, boundaries=frozenset(b.value for b in Boundary))
