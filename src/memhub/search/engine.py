"""Hybrid search (BM25 text + vector cosine, fused) and the vector backfill.

`SearchEngine.search` runs the text side (FTS5 through the store's visibility filter) and,
when the model is ready, the vector side (query embedding, then the `VectorSearch` with
candidates filtered by the same visibility rule), and fuses them. It never waits for a
model to load: until `EmbeddingService.ready`, results come from text alone. Database and
numpy work run on worker threads, never on the event loop.

`VectorBackfill` (re-exported from `memhub.search.backfill`) gives items their vectors.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import anyio
import numpy as np

from memhub.core.errors import invalid
from memhub.core.models import Boundary, Viewer
from memhub.core.text import search_terms
from memhub.search.backfill import VectorBackfill
from memhub.search.embedders.base import EmbedderUnavailable, Matrix
from memhub.search.embedding import EmbeddingService
from memhub.search.explain import Explanation
from memhub.search.fusion import FUSION_METHODS, FusedHit, FusionMethod, fuse_hits
from memhub.search.vector_search import VectorSearch, VisibleTo
from memhub.store.base import Store, Visibility

log = logging.getLogger(__name__)

__all__ = ["SearchEngine", "VectorBackfill"]

MAX_K = 1000  # per-side and final result caps
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
        """The best `k_final` items visible to `viewer`, best first. With `explain`, what
        each stage computed is written into it (search/explain.py); the ranking is the same."""
        for name, value in (("k_txt", k_txt), ("k_vec", k_vec), ("k_final", k_final)):
            if not 0 <= value <= MAX_K:
                raise invalid(f"{name} must be between 0 and {MAX_K}", **{name: value})
        if method not in FUSION_METHODS:
            raise invalid(f"unknown fusion method {method!r}; expected one of: {', '.join(FUSION_METHODS)}")
        if not 0.0 <= alpha <= 1.0 or math.isnan(alpha):
            raise invalid("alpha must be between 0 and 1", alpha=alpha)
        if not query.strip() or k_final == 0:
            return []
        kinds = tuple(kinds)
        if explain is not None:
            explain.query, explain.method, explain.alpha = query, method, alpha
        text_hits: list[tuple[int, float]] = []
        vector_hits: list[tuple[int, float]] = []

        embedding, vectors = self.embedding, self.vectors
        linear = method == "linear"

        async def text_side(split_cjk: bool) -> None:
            nonlocal text_hits
            text_hits = await self._text_hits(viewer, query, kinds, project_id, k_txt, split_cjk, explain)

        async def vector_side(embedding: EmbeddingService, vectors: VectorSearch) -> None:
            nonlocal vector_hits
            vector_hits = await self._vector_hits(
                embedding, vectors, viewer, query, kinds, project_id, k_vec, explain
            )

        wants_vectors = k_vec > 0 and not (linear and alpha == 0.0)
        # not `vectors.size() > 0`: an index another process filled is only read by the search
        with_vectors = wants_vectors and embedding is not None and vectors is not None and embedding.ready
        async with anyio.create_task_group() as group:
            if k_txt > 0 and not (linear and alpha == 1.0):
                group.start_soon(text_side, not with_vectors)
            if with_vectors and embedding is not None and vectors is not None:
                group.start_soon(vector_side, embedding, vectors)
        fused = fuse_hits(
            text_hits, vector_hits, method=method, alpha=alpha, k_final=k_final, explain=explain
        )
        if explain is not None and with_vectors and embedding is not None:
            await anyio.to_thread.run_sync(partial(self._per_model, embedding, fused, explain))
        return fused

    def _per_model(self, embedding: EmbeddingService, fused: list[FusedHit], explain: Explanation) -> None:
        """Each model's own cosine of the query and every vector hit (explain only): a pair of
        models (search/embedders/combined.py) scores `w * cos_a + (1 - w) * cos_b`."""
        query_vec = explain.query_vec
        if query_vec is None:
            return
        model = embedding.embedder
        first, second = getattr(model, "first", None), getattr(model, "second", None)
        weight = getattr(model, "weight", None)
        with self.store.transaction(write=False) as tx:
            for hit in fused:
                if hit.vector_score is None:
                    continue
                blob = tx.get_vector(hit.item_id, embedding.id)
                if blob is None:
                    continue
                vec = np.frombuffer(blob, dtype="<f4")
                if first is None or second is None or not isinstance(weight, float):
                    explain.models[hit.item_id] = {embedding.id: float(vec @ query_vec)}
                    continue
                cut = int(first.dim)
                explain.models[hit.item_id] = {
                    str(first.id): float(vec[:cut] @ query_vec[:cut]) / weight,
                    str(second.id): float(vec[cut:] @ query_vec[cut:]) / (1.0 - weight),
                }

    async def _text_hits(
        self,
        viewer: Viewer,
        query: str,
        kinds: tuple[str, ...],
        project_id: int | None,
        limit: int,
        split_cjk: bool = True,
        explain: Explanation | None = None,
    ) -> list[tuple[int, float]]:
        """BM25 hits. Alone (no vectors) the keyword side must find paraphrases too, so CJK
        runs are cut into content words; beside vectors it is the precise signal and a CJK
        run must appear whole: on bench/data/ja_set.json with e5+use, splitting lowered hit@5
        from 0.838 to 0.796 (weak keyword matches on the wrong memories), while BM25 alone
        rose from 0.176 to 0.366 (Japanese queries 0.017 -> 0.483)."""
        terms = search_terms(query, split_cjk=split_cjk)
        if not terms:
            return []

        def run() -> list[tuple[int, float]]:
            with self.store.transaction(write=False) as tx:
                if explain is None:
                    return tx.text_search(viewer, terms, kinds, project_id, limit)
                # how many hits ranked among these a viewer of every boundary class would read
                explain.terms = list(terms)
                hits, hidden = tx.text_search_hidden(
                    viewer, _every_class(viewer), terms, kinds, project_id, limit
                )
                explain.hidden["text_by_boundary"] = hidden
                return hits

        return await anyio.to_thread.run_sync(run)

    async def _vector_hits(
        self,
        embedding: EmbeddingService,
        vectors: VectorSearch,
        viewer: Viewer,
        query: str,
        kinds: tuple[str, ...],
        project_id: int | None,
        limit: int,
        explain: Explanation | None = None,
    ) -> list[tuple[int, float]]:
        query_vec: Matrix | None = None
        try:
            with anyio.move_on_after(self.vector_timeout):
                query_vec = await embedding.embed_query(query[:MAX_QUERY_EMBED_CHARS])
        except EmbedderUnavailable as exc:
            log.warning("vector search skipped: %s", exc.message)
            return []
        if query_vec is None:
            self.vector_timeouts += 1
            log.info("vector search skipped: no query embedding within %.1f s", self.vector_timeout)
            return []
        if explain is not None:
            explain.query_vec = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        return await anyio.to_thread.run_sync(
            partial(self._search_index, vectors, query_vec, viewer, kinds, project_id, limit, explain)
        )

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
        if self.vectors is None or k <= 0:
            return []
        return await anyio.to_thread.run_sync(
            partial(self._search_index, self.vectors, query_vec, viewer, tuple(kinds), project_id, k)
        )

    def _search_index(
        self,
        index: VectorSearch,
        query_vec: Matrix,
        viewer: Viewer,
        kinds: tuple[str, ...],
        project_id: int | None,
        limit: int,
        explain: Explanation | None = None,
    ) -> list[tuple[int, float]]:
        index.refresh()
        if explain is None:  # the rule itself: a search in the database applies it in its query
            rule = Visibility(viewer, kinds, project_id)
            return index.search(query_vec, limit, VisibleTo(self.store, rule))

        # with `explain`, candidates pass through here so that hidden ones are counted: nearest
        # neighbours a boundary class removed, counts only, within what the viewer may otherwise
        # read: items of other principals are never counted (a count of them would tell a
        # caller what others keep near its query)
        hidden = explain.hidden

        def allowed(ids: list[int]) -> set[int]:
            with self.store.transaction(write=False) as tx:
                passed = tx.visible_ids(viewer, ids, kinds, project_id)
                wider = tx.visible_ids(_every_class(viewer), ids, kinds, project_id)
                hidden["vector_by_boundary"] = hidden.get("vector_by_boundary", 0) + len(wider - passed)
                return passed

        return index.search(query_vec, limit, allowed)


def _every_class(viewer: Viewer) -> Viewer:
    """The same eyes with every boundary class: only to count what the classes hid."""
    return replace(viewer, boundaries=frozenset(b.value for b in Boundary))
