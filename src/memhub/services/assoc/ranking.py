"""Pure scoring for associative memory: calibrated similarity and the usage/importance rerank.

similarity (what `threshold` compares with, 0-1):
  - with a vector hit: the embedder's cosine calibrated against its unrelated query/memory
    pairs (memhub.search.calibration, "query" mode): 0 for a typical unrelated pair, 0.7 for
    one more alike than 95 % of them, rising towards 1 for closer ones;
  - text-only hit: its BM25 relative to the best BM25 of the query (the best keyword match is 1).
relevance (how well the memory matches, 0-1; what ranks; both sides through search/fusion.py's
`anchored` normaliser):
  relevance = alpha * (cos - floor) / (best_cos - floor)
              + (1 - alpha) * coverage * (bm25 - lowest_bm25) / (best_bm25 - lowest_bm25)
  floor = min(the embedder's unrelated-text cosine, the lowest candidate cosine); the BM25
  range is the text candidates' (`text_range`: with fewer than MINMAX_TEXT of them, from half
  the best, so two near-identical memories stay close and importance can order them). This is min-max fusion,
  which scored best in bench/quality; min-max on the text side (rather than bm25 / best)
  lifted the ja set from 0.789 to 0.859 hit@5 with e5+use, LoCoMo unchanged (weak keyword
  matches in the wrong language stop adding up). Anchoring the vector side at the unrelated
  level keeps the second of two near-identical hits from dropping to 0 on a small store.
  coverage = the share of the query's keyword terms the memory contains: the best BM25 of a
  query can be a memory sharing one incidental word with it (a cross-lingual query, a
  paraphrase), and min-max alone would give it the full text weight. Offline
  (bench/quality/explore.py, e5+use, alpha 0.5) it lifted the ja set 0.803 -> 0.873 hit@5
  and LoCoMo 0.644 -> 0.646 (hit@1 0.373 -> 0.394, MRR 0.488 -> 0.499).
  alpha = alpha_for(the best coverage among the COVERAGE_PROBE best BM25 candidates): 0.4
  when the query's words are in a memory, 0.7 when they are not (docs/ranking.md).
score (what results are sorted by):
  score = relevance * (0.7 + 0.2 * importance + 0.1 * usage),
  usage = min(1, ln(1 + access_count) / ln(21))   (20 reads count as fully used)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache, lru_cache

from memhub.search import calibration
from memhub.search.fusion import anchored

# embedder id prefix -> cosine of unrelated texts, the anchor of the vector side of `relevance`
# (bench/quality/explore.py on both sets: unrelated pairs' median 0.60-0.64 for e5+use). The
# first matching prefix wins: "e5+use" before "e5".
UNRELATED_COSINE: dict[str, float] = {"e5+use": 0.61, "e5": 0.78, "use": 0.10, "hash": 0.0}
USAGE_SATURATION = 20
# query-dependent fusion weight (docs/ranking.md "Which side to trust"): the vector side's
# weight is ALPHA_KEYWORD when a keyword candidate holds at least COVERAGE_CUT of the query's
# terms (the query's words are in the store: trust them), ALPHA_PARAPHRASE when none does (a
# paraphrase or another language: the best BM25 is an incidental word). The best coverage is
# read among the COVERAGE_PROBE best BM25 candidates (on LoCoMo and the ja set the same
# decision as over all of them for all but 3 of 2,124 questions).
ALPHA_KEYWORD = 0.4
ALPHA_PARAPHRASE = 0.7
COVERAGE_CUT = 0.5
COVERAGE_PROBE = 20


def _clip(value: float) -> float:
    """max(0.0, min(1.0, value)), NaN included (1.0), without two builtin calls: this runs
    several times for each of a search's ~400 candidates."""
    low = value if value < 1.0 else 1.0
    return low if low > 0.0 else 0.0


def calibrated(embedder_id: str, cosine: float) -> float:
    """The calibrated similarity of a query and a memory (what `threshold` is compared with)."""
    return calibration.calibrated(embedder_id, cosine, "query")


def association(
    layout: Sequence[calibration.Part],
    a: calibration.Vector,
    b: calibration.Vector,
    text_a: str | calibration.Profile | None = None,
    text_b: str | calibration.Profile | None = None,
) -> float:
    """`associations` of two memories."""
    return associations(layout, a, b[None, :], text_a, [text_b])[0]


def associations(
    layout: Sequence[calibration.Part],
    a: calibration.Vector,
    others: calibration.Matrix,
    text_a: str | calibration.Profile | None,
    texts: Sequence[str | calibration.Profile | None],
) -> list[float]:
    """The calibrated similarity of a memory and each of `others` from their stored vectors
    (rows), model by model (calibration.pair_similarities), given their texts (or their
    calibration.profile, read once for a memory compared with many) where known: the
    baselines of their language pair (two English, two Japanese or one of each) and the
    terms they share."""
    one = _profile(text_a)
    pairs: list[calibration.LanguagePair] = []
    shared: list[float] = []
    for text in texts:
        other = _profile(text)
        if one is None or other is None:
            pairs.append("any")
            shared.append(0.0)
        else:
            pairs.append(calibration.language_pair(one.language, other.language))
            shared.append(calibration.overlap(one.terms, other.terms))
    return calibration.pair_similarities(layout, a, others, pairs, shared)


def _profile(text: str | calibration.Profile | None) -> calibration.Profile | None:
    return calibration.profile(text) if isinstance(text, str) else text


@cache  # a lookup in a constant table, once per search candidate
def unrelated_level(embedder_id: str) -> float:
    return next((floor for prefix, floor in UNRELATED_COSINE.items() if embedder_id.startswith(prefix)), 0.0)


def similarity(
    embedder_id: str | None, vector_score: float | None, text_score: float | None, best_text: float
) -> float:
    if vector_score is not None and embedder_id is not None:
        return calibrated(embedder_id, vector_score)
    if text_score is not None and best_text > 0:
        return _clip(text_score / best_text)
    return 0.0


MINMAX_TEXT = 5  # text candidates needed before the lowest BM25 counts as 0


def text_range(scores: list[float]) -> tuple[float, float]:
    """(lowest, best) BM25 that `relevance` rescales the text side by."""
    if not scores:
        return (0.0, 0.0)
    best = max(scores)
    lowest = min(scores)
    return (lowest if len(scores) >= MINMAX_TEXT else min(lowest, best / 2), best)


def relevance_parts(
    embedder_id: str | None,
    vector_score: float | None,
    text_score: float | None,
    text_range: tuple[float, float],
    cosine_range: tuple[float, float] = (0.0, 1.0),
    coverage: float = 1.0,
) -> tuple[float, float | None]:
    """(text side, vector side) of `relevance`, each in [0, 1]; the vector side is None
    without an embedder (then relevance is the text side alone)."""
    text = 0.0
    if text_score is not None:
        low, best_text = text_range
        text = anchored(text_score, low, best_text, flat=1.0) * _clip(coverage)
    if embedder_id is None:
        return text, None
    lowest, best = cosine_range
    floor = min(unrelated_level(embedder_id), lowest)
    vector = anchored(vector_score, floor, best, flat=0.0) if vector_score is not None else 0.0
    return text, vector


def relevance(
    embedder_id: str | None,
    vector_score: float | None,
    text_score: float | None,
    text_range: tuple[float, float],
    alpha: float,
    cosine_range: tuple[float, float] = (0.0, 1.0),
    coverage: float = 1.0,
) -> float:
    """`text_range`: (lowest, best) BM25 among the query's text candidates; `cosine_range`:
    (lowest, best) cosine among its vector candidates; `coverage`: the share of the query's
    keyword terms the memory contains (core.text.term_coverage), which scales the text side."""
    parts = relevance_parts(embedder_id, vector_score, text_score, text_range, cosine_range)
    return mix(parts, alpha, coverage)


def mix(parts: tuple[float, float | None], alpha: float, coverage: float = 1.0) -> float:
    """`relevance` from its `relevance_parts` taken at full coverage: a rerank that needs the
    relevance of a memory at several coverages (or alphas) computes its parts once."""
    text, vector = parts
    text *= _clip(coverage)
    if vector is None:
        return text
    return alpha * vector + (1 - alpha) * text


def alpha_for(best_coverage: float) -> float:
    """The vector weight of `relevance` for a query whose best keyword candidate contains
    `best_coverage` of its terms (0 when there is no keyword candidate)."""
    return ALPHA_KEYWORD if best_coverage >= COVERAGE_CUT else ALPHA_PARAPHRASE


@lru_cache(maxsize=1024)  # a small integer: the same few values for every candidate
def usage(access_count: int) -> float:
    return min(1.0, math.log1p(max(0, access_count)) / math.log1p(USAGE_SATURATION))


def score(relevance: float, importance: float, access_count: int) -> float:
    return relevance * (0.7 + 0.2 * _clip(importance) + 0.1 * usage(access_count))
