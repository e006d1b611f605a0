"""Pure scoring for associative memory: calibrated similarity and the usage/importance rerank.

similarity (what `threshold` compares with, 0-1):
  - with a vector hit: the embedder's cosine rescaled so that the default 0.7 keeps most real
    answers (refit on bench/quality: the median cosine of a query and its answer is 0.837 for
    e5, 0.30 for USE);
  - text-only hit: its BM25 relative to the best BM25 of the query (the best keyword match is 1).
relevance (how well the memory matches, 0-1; what ranks):
  relevance = alpha * (cos - floor) / (best_cos - floor) + (1 - alpha) * bm25 / best_bm25
  floor = min(the embedder's unrelated-text cosine, the lowest candidate cosine)
  (text only: bm25 / best_bm25). Over many candidates this is min-max fusion, which scored
  best in bench/quality (LoCoMo hit@5 0.633 vs 0.630, ja set 0.718 vs 0.669 for the
  clipped calibrated cosine, e5, alpha 0.5); anchoring at the unrelated level keeps the
  second of two near-identical hits from dropping to 0 on a small store.
score (what results are sorted by):
  score = relevance * (0.7 + 0.2 * importance + 0.1 * usage),
  usage = min(1, ln(1 + access_count) / ln(21))   (20 reads count as fully used)
"""

from __future__ import annotations

import math

# embedder id prefix -> (cosine at similarity 0.7, slope, cosine of unrelated texts):
# similarity = 0.7 + slope * (cos - pivot)
CALIBRATION: dict[str, tuple[float, float, float]] = {
    # e5+use (0.75 e5 + 0.25 USE): answers' median cosine 0.70-0.72, lower quartile 0.67-0.69,
    # unrelated pairs' median 0.60-0.64 (bench/quality/explore.py on both sets). Before "e5":
    # the first matching prefix wins.
    "e5+use": (0.67, 4.5, 0.61),
    "e5": (0.81, 6.0, 0.78),  # bench/quality: median e5 cosine of a query and its answer 0.837
    "use": (0.25, 1.5, 0.10),  # ... and for USE 0.30
    "hash": (0.35, 1.0, 0.0),
}
USAGE_SATURATION = 20


def _clip(value: float) -> float:
    return max(0.0, min(1.0, value))


def calibrated(embedder_id: str, cosine: float) -> float:
    for prefix, (pivot, slope, _) in CALIBRATION.items():
        if embedder_id.startswith(prefix):
            return _clip(0.7 + slope * (cosine - pivot))
    return _clip(cosine)


def unrelated_level(embedder_id: str) -> float:
    return next(
        (floor for prefix, (_, _, floor) in CALIBRATION.items() if embedder_id.startswith(prefix)), 0.0
    )


def similarity(
    embedder_id: str | None, vector_score: float | None, text_score: float | None, best_text: float
) -> float:
    if vector_score is not None and embedder_id is not None:
        return calibrated(embedder_id, vector_score)
    if text_score is not None and best_text > 0:
        return _clip(text_score / best_text)
    return 0.0


def relevance(
    embedder_id: str | None,
    vector_score: float | None,
    text_score: float | None,
    best_text: float,
    alpha: float,
    cosine_range: tuple[float, float] = (0.0, 1.0),
) -> float:
    """`cosine_range`: (lowest, best) cosine among the query's vector candidates."""
    text = _clip(text_score / best_text) if text_score is not None and best_text > 0 else 0.0
    if embedder_id is None:
        return text
    lowest, best = cosine_range
    floor = min(unrelated_level(embedder_id), lowest)
    vector = (
        _clip((vector_score - floor) / (best - floor)) if vector_score is not None and best > floor else 0.0
    )
    return alpha * vector + (1 - alpha) * text


def usage(access_count: int) -> float:
    return min(1.0, math.log1p(max(0, access_count)) / math.log1p(USAGE_SATURATION))


def score(relevance: float, importance: float, access_count: int) -> float:
    return relevance * (0.7 + 0.2 * _clip(importance) + 0.1 * usage(access_count))
