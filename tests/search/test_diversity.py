"""Diversity of the first results (search/diversity.py): maximal marginal relevance."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from memhub.search.diversity import diversify


def _unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_restatement_of_the_first_result_gives_way_to_a_close_distinct_one() -> None:
    vectors = {1: _unit(1, 0, 0), 2: _unit(1, 0.01, 0), 3: _unit(0, 1, 0)}
    scores, weights = {1: 0.90, 2: 0.89, 3: 0.86}, dict.fromkeys((1, 2, 3), 1.0)
    chosen = diversify([1, 2, 3], scores, weights, vectors, floor=0.5, penalty=0.1, limit=2)
    assert [i for i, _, _ in chosen] == [1, 3]  # 2 says what 1 says: 0.89 - 0.1 < 0.86
    assert chosen[0] == (1, 0.90, 0.0) and chosen[1][1] == pytest.approx(0.86)
    # a distinct memory far below stays below: the penalty is at most `penalty · weight`
    far = diversify([1, 2, 3], {**scores, 3: 0.70}, weights, vectors, floor=0.5, penalty=0.1, limit=2)
    assert [i for i, _, _ in far] == [1, 2]
    assert far[1][1] == pytest.approx(0.89 - 0.1 * far[1][2]) and far[1][2] > 0.99


def test_the_penalty_scales_with_the_weight_and_ignores_unrelated_pairs() -> None:
    vectors = {1: _unit(1, 0), 2: _unit(1, 0.01), 3: _unit(0.6, 0.8)}  # cos(1, 3) = 0.6 < floor 0.7
    chosen = diversify([1, 3, 2], {1: 1.0, 3: 0.8, 2: 0.79}, {1: 1.0, 3: 1.0, 2: 0.5}, vectors, 0.7, 0.2, 3)
    assert [(i, round(r, 3)) for i, _, r in chosen] == [(1, 0.0), (3, 0.0), (2, 1.0)]
    assert chosen[2][1] == pytest.approx(0.79 - 0.2 * 0.5 * chosen[2][2])


def test_no_penalty_or_no_vectors_keep_the_order() -> None:
    scores, weights = {5: 0.9, 4: 0.9, 3: 0.2}, dict.fromkeys((3, 4, 5), 1.0)
    same = {i: _unit(1, 0) for i in scores}
    assert diversify([5, 4, 3], scores, weights, same, 0.5, 0.0, 3) == [
        (5, 0.9, 0.0),
        (4, 0.9, 0.0),
        (3, 0.2, 0.0),
    ]
    assert [i for i, _, _ in diversify([5, 4, 3], scores, weights, {}, 0.5, 0.3, 2)] == [5, 4]


def test_values_never_increase_and_the_first_is_the_best() -> None:
    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(1, 25)
        ranked = list(range(n))
        scores = dict(zip(ranked, sorted((rng.random() for _ in ranked), reverse=True), strict=True))
        weights = {i: 0.7 + 0.3 * rng.random() for i in ranked}
        vectors = {i: _unit(*(rng.random() for _ in range(4))) for i in ranked if rng.random() < 0.8}
        limit = rng.randint(1, 12)
        chosen = diversify(ranked, scores, weights, vectors, 0.6, rng.choice((0.05, 0.1, 0.3)), limit)
        assert len(chosen) == min(limit, n) and len({i for i, _, _ in chosen}) == len(chosen)
        assert chosen[0][0] == 0
        values = [v for _, v, _ in chosen]
        assert all(a >= b - 1e-12 for a, b in itertools.pairwise(values))


def test_a_weak_restatement_scores_zero_not_below() -> None:
    """The seed's score range is [0, 1]: a near-duplicate whose relevance is under the penalty
    is chosen last with 0, not a negative score."""
    same = np.ones(4, dtype=np.float32) / 2.0
    vectors = {1: same, 2: same, 3: same}
    chosen = diversify([1, 2, 3], {1: 0.9, 2: 0.05, 3: 0.04}, {1: 1.0, 2: 1.0, 3: 1.0}, vectors, 0.0, 0.1, 3)
    assert [item for item, _, _ in chosen] == [1, 2, 3]
    assert [value for _, value, _ in chosen] == [0.9, 0.0, 0.0]
