"""Fusing the text (BM25) and vector (cosine) hit lists into one ranking. Pure functions.

`fuse` is a convex combination of min-max normalised scores; `reciprocal_rank_fusion`
uses ranks only. Both break ties by item id, so results are deterministic. Which method
and which `alpha` serve best is decided by the benchmarks; both are parameters.

The normalisers are named here, once, and each toolset's rerank picks one by name:

min_max    (s - lowest) / (best - lowest) over the candidates (`normalize_scores`): the
           engine's fusion
by_best    s / best, negatives 0: pce's rerank (a weak match keeps a share)
anchored   (s - floor) / (best - floor) for a floor the caller chooses: assoc's rerank
           (BM25 from its lowest candidate or half the best; cosine from the unrelated level)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from memhub.core.errors import invalid

if TYPE_CHECKING:
    from memhub.search.explain import Explanation

FusionMethod = Literal["linear", "rrf"]
FUSION_METHODS: tuple[FusionMethod, ...] = ("linear", "rrf")

Hits = Sequence[tuple[int, float]]


@dataclass(frozen=True, slots=True)
class FusedHit:
    """One result. `text_score` / `vector_score` are the raw BM25 relevance / cosine, or None
    when that side did not retrieve the item; `combined` is what the ranking sorts by."""

    item_id: int
    combined: float
    text_score: float | None
    vector_score: float | None


def normalize_scores(scores: Sequence[float]) -> list[float]:
    """Min-max to [0, 1]. A single score, or all-equal scores, map to 1.0.

    Non-finite scores never stretch the range: +inf maps to 1.0, -inf and NaN to 0.0.
    """
    finite = [s for s in scores if math.isfinite(s)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    out: list[float] = []
    for score in scores:
        if math.isnan(score) or score == -math.inf:
            out.append(0.0)
        elif score == math.inf or high <= low:
            out.append(1.0)
        else:
            out.append((score - low) / (high - low))
    return out


def by_best(scores: Sequence[float]) -> list[float]:
    """Each score over the best one (negatives and non-finite count 0): the best is 1.0 and a
    weak match keeps a share, where min-max would give the weakest candidate 0 whatever its
    match (and leave a rerank's factors nothing to work on)."""
    clean = [s if math.isfinite(s) and s > 0 else 0.0 for s in scores]
    best = max(clean, default=0.0)
    return [s / best if best > 0 else 0.0 for s in clean]


def anchored(score: float, floor: float, best: float, flat: float = 1.0) -> float:
    """`(score - floor) / (best - floor)` clipped to [0, 1]; `flat` when `best` is not above
    `floor` (every candidate scored alike)."""
    if score != score:  # NaN (math.isnan, without the call: this runs for every candidate)
        return 0.0
    if best <= floor:
        return flat
    value = (score - floor) / (best - floor)  # max(0.0, min(1.0, value)), inline
    value = value if value < 1.0 else 1.0
    return value if value > 0.0 else 0.0


Normaliser = Literal["min_max", "by_best"]
NORMALISERS: dict[str, Callable[[Sequence[float]], list[float]]] = {
    "min_max": normalize_scores,
    "by_best": by_best,
}


def normalised(hits: Iterable[tuple[int, float]], normaliser: Normaliser) -> dict[int, float]:
    """Item -> its score normalised over `hits` by the named normaliser."""
    pairs = list(hits)
    return dict(zip([i for i, _ in pairs], NORMALISERS[normaliser]([s for _, s in pairs]), strict=True))


def _best(hits: Iterable[tuple[int, float]]) -> dict[int, float]:
    """Item -> its best score (a list may name an item twice)."""
    best: dict[int, float] = {}
    for item_id, score in hits:
        value = float(score)
        if math.isnan(value):
            value = -math.inf  # sorts last, normalises to 0
        if item_id not in best or value > best[item_id]:
            best[item_id] = value
    return best


def _ranked(hits: dict[int, float]) -> list[int]:
    return sorted(hits, key=lambda item_id: (-hits[item_id], item_id))


def _check_k(k_final: int) -> None:
    if k_final < 0:
        raise invalid("k_final must not be negative", k_final=k_final)


def _span(scores: dict[int, float]) -> tuple[float, float]:
    finite = [s for s in scores.values() if math.isfinite(s)]
    return (min(finite), max(finite)) if finite else (0.0, 0.0)


def _record(
    explain: Explanation | None, text: dict[int, float], vector: dict[int, float], alpha: float
) -> None:
    if explain is not None:
        explain.text, explain.vector, explain.alpha_used = dict(text), dict(vector), alpha
        explain.text_range, explain.vector_range = _span(text), _span(vector)


def fuse(
    text_hits: Hits, vector_hits: Hits, *, alpha: float, k_final: int, explain: Explanation | None = None
) -> list[FusedHit]:
    """`combined = alpha * vector_norm + (1 - alpha) * text_norm`, a missing side counting 0.

    alpha = 0 is text only and alpha = 1 vector only (the other side's hits are dropped).
    When one side found nothing at all (e.g. the model is still loading), the other side
    carries the whole weight, so scores stay comparable. Sorted by combined desc, then id.
    """
    _check_k(k_final)
    if not 0.0 <= alpha <= 1.0 or math.isnan(alpha):
        raise invalid("alpha must be between 0 and 1", alpha=alpha)
    text = _best(text_hits) if alpha < 1.0 else {}
    vector = _best(vector_hits) if alpha > 0.0 else {}
    if not text:
        alpha = 1.0
    elif not vector:
        alpha = 0.0
    _record(explain, text, vector, alpha)
    text_norm = dict(zip(text, normalize_scores(list(text.values())), strict=True))
    vector_norm = dict(zip(vector, normalize_scores(list(vector.values())), strict=True))
    combined = {
        item_id: alpha * vector_norm.get(item_id, 0.0) + (1.0 - alpha) * text_norm.get(item_id, 0.0)
        for item_id in text.keys() | vector.keys()
    }
    order = sorted(combined, key=lambda item_id: (-combined[item_id], item_id))
    if explain is not None:
        explain.fused = {item_id: combined[item_id] for item_id in order}
    # only the hits returned are built (with 200 a side, up to twice as many are scored)
    return [FusedHit(i, combined[i], text.get(i), vector.get(i)) for i in order[:k_final]]


def reciprocal_rank_fusion(
    text_hits: Hits,
    vector_hits: Hits,
    *,
    k: int = 60,
    k_final: int,
    explain: Explanation | None = None,
) -> list[FusedHit]:
    """RRF: `combined = sum over sides of 1 / (k + rank)`, ranks from 1 (each side ranked by
    its own score desc, then id). Scores' scales never matter. Sorted by combined desc, then id."""
    _check_k(k_final)
    if k < 0:
        raise invalid("the RRF constant k must not be negative", k=k)
    text = _best(text_hits)
    vector = _best(vector_hits)
    _record(explain, text, vector, 0.5)
    combined: dict[int, float] = {}
    for side in (text, vector):
        for rank, item_id in enumerate(_ranked(side), start=1):
            combined[item_id] = combined.get(item_id, 0.0) + 1.0 / (k + rank)
    fused = [
        FusedHit(item_id, score, text.get(item_id), vector.get(item_id))
        for item_id, score in combined.items()
    ]
    fused.sort(key=lambda hit: (-hit.combined, hit.item_id))
    if explain is not None:
        explain.fused = {hit.item_id: hit.combined for hit in fused}
    return fused[:k_final]


def fuse_hits(
    text_hits: Hits,
    vector_hits: Hits,
    *,
    method: FusionMethod = "linear",
    alpha: float = 0.5,
    k_final: int = 10,
    rrf_k: int = 60,
    explain: Explanation | None = None,
) -> list[FusedHit]:
    """Dispatch on `method` ("linear": `fuse` with `alpha`; "rrf": `reciprocal_rank_fusion`).
    With `explain`, the raw scores, ranges and the weight used are recorded there."""
    if method == "linear":
        return fuse(text_hits, vector_hits, alpha=alpha, k_final=k_final, explain=explain)
    if method == "rrf":
        return reciprocal_rank_fusion(text_hits, vector_hits, k=rrf_k, k_final=k_final, explain=explain)
    raise invalid(f"unknown fusion method {method!r}; expected one of: {', '.join(FUSION_METHODS)}")
