"""Pure scoring for associative memory: calibrated similarity and the usage/importance rerank.

similarity (what `threshold` compares with, 0-1):
  - with a vector hit: the embedder's cosine rescaled so that 0.7 separates related from
    unrelated memories (e5 cosines of unrelated texts sit near 0.80, paraphrases above 0.86);
  - text-only hit: its BM25 relative to the best BM25 of the query (the best keyword match is 1).
relevance (how well the memory matches, 0-1), from absolute signals so that it does not
collapse when there are few candidates (min-max scaling would give the second of two hits 0):
  relevance = alpha * calibrated_cosine + (1 - alpha) * bm25 / best_bm25      (with vectors)
  relevance = bm25 / best_bm25                                                  (text only)
score (what results are sorted by):
  score = relevance * (0.7 + 0.2 * importance + 0.1 * usage),
  usage = min(1, ln(1 + access_count) / ln(21))   (20 reads count as fully used)
"""

from __future__ import annotations

import math

# embedder id prefix -> (cosine at similarity 0.7, slope): similarity = 0.7 + slope * (cos - pivot)
CALIBRATION: dict[str, tuple[float, float]] = {
    "e5": (0.84, 6.0),
    "use": (0.45, 1.5),
    "hash": (0.35, 1.0),
}
USAGE_SATURATION = 20


def _clip(value: float) -> float:
    return max(0.0, min(1.0, value))


def calibrated(embedder_id: str, cosine: float) -> float:
    for prefix, (pivot, slope) in CALIBRATION.items():
        if embedder_id.startswith(prefix):
            return _clip(0.7 + slope * (cosine - pivot))
    return _clip(cosine)


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
) -> float:
    text = _clip(text_score / best_text) if text_score is not None and best_text > 0 else 0.0
    if embedder_id is None:
        return text
    vector = calibrated(embedder_id, vector_score) if vector_score is not None else 0.0
    return alpha * vector + (1 - alpha) * text


def usage(access_count: int) -> float:
    return min(1.0, math.log1p(max(0, access_count)) / math.log1p(USAGE_SATURATION))


def score(relevance: float, importance: float, access_count: int) -> float:
    return relevance * (0.7 + 0.2 * _clip(importance) + 0.1 * usage(access_count))
