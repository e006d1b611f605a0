"""Conversation context in the ranking (search/context.py): neighbours from temporal links, lending."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tests.conftest import make_settings
from tests.store.backends import Backend

from memhub.cli.container import build_container
from memhub.core.models import Kind
from memhub.search.context import Bounded, contenders, lend, lend_best, neighbours
from memhub.store.base import NewItem


def test_lend_adds_a_share_of_the_best_candidate_neighbour_and_stays_within_one() -> None:
    scores = {1: 0.5, 2: 0.5, 3: 1.0, 4: 0.2}
    near = {1: (3,), 3: (1, 9), 2: (), 4: (9,)}  # 9 is no candidate: it lends nothing
    lent = lend(scores, near, 0.5)
    assert lent[1] == pytest.approx((0.5 + 0.5 * 1.0) / 1.5)
    assert lent[2] == pytest.approx(0.5 / 1.5)  # no neighbour: only rescaled
    assert lent[3] == pytest.approx((1.0 + 0.5 * 0.5) / 1.5)
    assert lent[4] == pytest.approx(0.2 / 1.5)
    assert lent[1] > lent[2]  # equal on their own, the one beside a strong match first
    assert max(lent.values()) <= 1.0
    assert lend(scores, near, 0.0) == scores


def _top(
    scores: dict[int, float],
    weights: dict[int, float],
    near: dict[int, tuple[int, ...]],
    share: float,
    k: int,
) -> list[int]:
    lent = lend(scores, near, share)
    return sorted(weights, key=lambda i: (-lent[i] * weights[i], i))[:k]


def _both_ways(links: list[tuple[int, int]], ends: set[int] | None = None) -> dict[int, tuple[int, ...]]:
    """Item -> linked items, from the links touching `ends` (all when None): what neighbours() reads."""
    near: dict[int, list[int]] = {}
    for a, b in links:
        if ends is None or a in ends or b in ends:
            near.setdefault(a, []).append(b)
            near.setdefault(b, []).append(a)
    return {i: tuple(v) for i, v in near.items()}


def test_reading_the_contenders_links_only_gives_the_same_first_results() -> None:
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 60)
        scores = {i: rng.random() ** 2 for i in range(n)}
        weights = {i: 0.7 + 0.3 * rng.random() for i in range(n) if rng.random() < 0.8}
        links = [(i, i - 1) for i in range(1, n) if rng.random() < 0.9]  # a session's chain
        limit, share = rng.randint(1, 12), rng.choice((0.1, 0.2, 0.5))
        chosen = set(contenders(scores, weights, share, limit))
        assert len(chosen) >= min(limit, len(weights))
        every = _top(scores, weights, _both_ways(links), share, limit)
        assert _top(scores, weights, _both_ways(links, chosen), share, limit) == every


def test_bounded_scores_give_the_same_contenders_and_first_results_computing_fewer() -> None:
    rng = random.Random(5)
    computed_share = []
    for _ in range(300):
        n = rng.randint(1, 80)
        scores = {i: rng.random() ** 2 for i in range(n)}
        if rng.random() < 0.3:  # ties
            scores = {i: round(s, 1) for i, s in scores.items()}
        low = {i: s * rng.choice((1.0, rng.random())) for i, s in scores.items()}
        high = {i: s + rng.choice((0.0, (1 - s) * rng.random())) for i, s in scores.items()}
        weights = {i: 0.7 + 0.3 * rng.random() for i in range(n) if rng.random() < 0.8}
        links = [(i, i - 1) for i in range(1, n) if rng.random() < 0.9]
        limit, share = rng.randint(1, 12), rng.choice((0.0, 0.1, 0.2, 0.5))
        ceiling = max(high.values())
        bounded = Bounded(low, high, scores.__getitem__)
        chosen = contenders(bounded, weights, share, limit, ceiling)
        assert chosen == contenders(scores, weights, share, limit, ceiling)
        near = _both_ways(links, set(chosen))
        pool = rng.randint(1, 30)
        lent = lend_best(bounded, near, share, weights, pool)
        every = lend(scores, near, share)
        assert all(lent[i] == every[i] for i in lent)
        best = sorted(weights, key=lambda i: (-every[i] * weights[i], -i))[:pool]
        assert sorted(lent, key=lambda i: (-lent[i] * weights[i], -i))[:pool] == best
        computed_share.append(len(bounded.known) / n)
    assert sum(computed_share) / len(computed_share) < 0.9  # bounds spare some of the work


def test_neighbours_are_temporal_links_in_both_directions(tmp_path: Path, backend: Backend) -> None:
    container = build_container(make_settings(tmp_path, backend))
    try:
        store = container.runtime.store
        with store.transaction(write=True) as tx:
            tx.ensure_principal("alice")
            ids = [
                tx.insert_item(NewItem(kind=Kind.MEMORY, owner="alice", scope="user", body=f"note {i}")).id
                for i in range(4)
            ]
            tx.upsert_link(ids[1], ids[0], "association", "temporal", 1.0)
            tx.upsert_link(ids[2], ids[1], "association", "temporal", 1.0)
            tx.upsert_link(ids[3], ids[0], "association", "semantic", 0.9)  # not a neighbour
        with store.transaction(write=False) as tx:
            near = neighbours(tx, ids)
            assert near.get(ids[0]) == (ids[1],)
            assert near.get(ids[1]) == tuple(sorted((ids[0], ids[2])))
            assert near.get(ids[2]) == (ids[1],)
            assert ids[3] not in near
            assert neighbours(tx, []) == {}
    finally:
        container.close()
