"""What the one retrieval pipeline hands a toolset's rerank: the fused candidates of one query.

`SearchEngine.run` (search/engine.py) gathers them in one read snapshot (viewer, keyword side,
vector side, fusion) and calls the toolset's rerank with that snapshot and a `Candidates`;
the services' entry point is `services/retrieval.py`. The query is tokenised once: the
keyword side's terms are `terms`, and the keyword coverage a rerank counts (`coverage`) and
the terms an explanation shows come from one parse of the query kept here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from memhub.core.models import Viewer
from memhub.core.text import term_coverage
from memhub.search.fusion import FusedHit


@dataclass(frozen=True)
class Candidates:
    """`hits`: the fused candidates, best first (FusedHit keeps each side's raw score);
    `embedder`: whose cosines `vector_score` holds, None when the vector side did not run
    (no model, still loading, or the text-only weight)."""

    query: str
    terms: tuple[str, ...]  # the keyword side's plain terms (core.text.search_terms)
    hits: list[FusedHit]
    viewer: Viewer
    embedder: str | None = None

    @cached_property
    def by_id(self) -> dict[int, FusedHit]:
        return {hit.item_id: hit for hit in self.hits}

    @property
    def ids(self) -> list[int]:
        return [hit.item_id for hit in self.hits]

    def text_scores(self) -> list[tuple[int, float]]:
        """(item, raw BM25) of the candidates the keyword side found."""
        return [(h.item_id, h.text_score) for h in self.hits if h.text_score is not None]

    def vector_scores(self) -> list[tuple[int, float]]:
        """(item, cosine) of the candidates the vector side found."""
        return [(h.item_id, h.vector_score) for h in self.hits if h.vector_score is not None]

    @cached_property
    def coverage(self) -> Callable[[str], float]:
        """The share (0-1) of the query's keyword terms a text contains (core.text.term_coverage),
        the query parsed once for every candidate."""
        return term_coverage(self.query)
