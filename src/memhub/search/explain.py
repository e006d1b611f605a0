"""Why a hit ranked where it did: the record `SearchEngine.run(explain=...)` fills in.

An `Explanation` is passed down the one retrieval pipeline and each stage writes what it
computed, so the numbers shown to a person are the ones the tools ranked by, not a second
computation: the engine writes the keyword terms, each side's raw scores, the per-model
cosines, the fusion's method, weight and normalisation ranges, and how many nearest
neighbours the visibility filter or the boundary classes removed (counts only); each
toolset's rerank then adds its factors per item (`factors`) and what its own filters
removed (`removed`), and the final score it sorted by (`final`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memhub.core.text import matched_terms


@dataclass
class Explanation:
    query: str = ""
    terms: list[str] = field(default_factory=list)  # the keyword side's plain terms
    method: str = "linear"
    alpha: float = 0.5  # the vector weight asked for
    alpha_used: float = 0.5  # after "one side found nothing: the other weighs 1"
    text: dict[int, float] = field(default_factory=dict)  # item -> raw BM25 (higher is better)
    vector: dict[int, float] = field(default_factory=dict)  # item -> cosine of the query
    models: dict[int, dict[str, float]] = field(default_factory=dict)  # item -> model -> cosine
    text_range: tuple[float, float] = (0.0, 0.0)  # (lowest, best) BM25 of the candidates
    vector_range: tuple[float, float] = (0.0, 0.0)
    fused: dict[int, float] = field(default_factory=dict)  # the engine's combined score
    hidden: dict[str, int] = field(default_factory=dict)  # what filters removed, counts only
    params: dict[str, float | str] = field(default_factory=dict)  # the rerank's settings
    factors: dict[int, dict[str, float | str]] = field(default_factory=dict)  # a toolset's rerank
    removed: dict[str, int] = field(default_factory=dict)  # the toolset's own filters, counts only
    final: dict[int, float] = field(default_factory=dict)  # what the toolset sorted by
    stage: str = ""  # which toolset's rerank filled `factors`
    found: dict[int, list[str]] = field(default_factory=dict)  # item -> keyword terms it contains
    query_vec: Any = None  # the query's embedding (numpy), for the per-model cosines
    _matcher: tuple[str, Callable[[str], list[str]]] | None = field(default=None, repr=False)

    def count(self, reason: str, n: int = 1) -> None:
        if n:
            self.removed[reason] = self.removed.get(reason, 0) + n

    def matched(self, text: str) -> list[str]:
        """The query's keyword terms `text` contains (stemmed words, whole CJK runs); the
        query is parsed once for every hit."""
        if self._matcher is None or self._matcher[0] != self.query:
            self._matcher = (self.query, matched_terms(self.query))
        return self._matcher[1](text)
