"""The pure scoring of associative search (services/assoc/ranking.py)."""

from __future__ import annotations

import pytest

from memhub.services.assoc.ranking import (
    ALPHA_KEYWORD,
    ALPHA_PARAPHRASE,
    COVERAGE_CUT,
    MINMAX_TEXT,
    alpha_for,
    calibrated,
    relevance,
    score,
    text_range,
)


def test_text_range_is_min_max_with_enough_candidates_else_anchored_at_half_the_best() -> None:
    assert text_range([]) == (0.0, 0.0)
    assert text_range([4.0]) == (2.0, 4.0)
    assert text_range([4.0, 3.8]) == (2.0, 4.0)  # two near-identical hits stay close
    many = [10.0, 8.0, 6.0, 4.0, 1.0]
    assert len(many) >= MINMAX_TEXT and text_range(many) == (1.0, 10.0)


def test_relevance_fuses_min_max_text_and_anchored_cosine() -> None:
    rng = (1.0, 10.0)
    assert relevance(None, None, 10.0, rng, 0.5) == 1.0  # text only: the best keyword match
    assert relevance(None, None, 1.0, rng, 0.5) == 0.0  # the weakest candidate counts nothing
    assert relevance(None, None, None, rng, 0.5) == 0.0
    # e5+use: unrelated pairs sit near 0.61, so a candidate at that level adds nothing
    assert relevance("e5+use-75/896", 0.61, None, rng, 0.5, (0.65, 0.81)) == 0.0
    best = relevance("e5+use-75/896", 0.81, 10.0, rng, 0.5, (0.65, 0.81))
    assert best == pytest.approx(1.0)
    half = relevance("e5+use-75/896", 0.71, 5.5, rng, 0.5, (0.65, 0.81))
    assert half == pytest.approx(0.5)


def test_calibration_prefers_the_longest_prefix_and_importance_reorders_only_close_matches() -> None:
    # 0.7 = a query/memory cosine at the unrelated pairs' 95th percentile of that embedder
    assert calibrated("e5+use-75/896", 0.660) == pytest.approx(0.7)
    assert calibrated("e5-small-q4/384", 0.829) == pytest.approx(0.7)
    assert calibrated("e5+use-75/896", 0.829) > 0.95  # e5+use, not e5's baseline
    assert score(0.95, 1.0, 0) > score(1.0, 0.0, 0)  # close: the important one first
    assert score(0.6, 1.0, 20) < score(1.0, 0.0, 0)  # a much better match still wins


def test_the_vector_weight_rises_when_no_keyword_candidate_holds_the_query() -> None:
    assert ALPHA_KEYWORD < ALPHA_PARAPHRASE
    assert alpha_for(1.0) == alpha_for(COVERAGE_CUT) == ALPHA_KEYWORD  # the query's words are stored
    assert alpha_for(COVERAGE_CUT - 0.01) == alpha_for(0.0) == ALPHA_PARAPHRASE  # a paraphrase, a translation
