"""pce ranking as pure functions (docs/ranking.md): components, recency, quality, the worked example."""

from __future__ import annotations

import pytest

from memhub.search.fusion import FusedHit
from memhub.services.pce import ranking


def test_components_scale_each_side_by_its_best() -> None:
    hits = [FusedHit(1, 0, 10.0, 0.8), FusedHit(2, 0, 5.0, None), FusedHit(3, 0, None, -0.2)]
    parts = ranking.components(hits, alpha=0.65)
    assert (parts[1].text, parts[1].vector) == (1.0, 1.0) and parts[1].combined == pytest.approx(1.0)
    assert parts[2].text == 0.5 and parts[2].combined == pytest.approx(0.35 * 0.5)
    assert parts[3].vector == 0.0 and parts[3].combined == 0.0  # negative cosine counts 0
    text_only = ranking.components([FusedHit(1, 0, 4.0, None), FusedHit(2, 0, 2.0, None)], alpha=0.65)
    assert text_only[2].combined == 0.5  # no vector hits at all: text weighs 1


def test_recency_quality_g_and_score() -> None:
    assert ranking.recency(0, 30) == 1.0 and ranking.recency(30, 30) == 0.5 and ranking.recency(-5, 30) == 1.0
    assert ranking.recency(60, 14) == pytest.approx(0.5 ** (60 / 14))
    assert ranking.quality_factor(0.0, True) == 0.5 and ranking.quality_factor(1.0, True) == 1.0
    assert ranking.quality_factor(-1.0, True) == 0.0 and ranking.quality_factor(-1.0, False) == 1.0
    assert ranking.g(0.5, 0.5, True) == pytest.approx(0.375)
    rows = [(0.5, "2025-01-01", 1), (0.5, "2025-02-01", 2), (0.9, "2024-01-01", 3), (0.5, "2025-02-01", 4)]
    ordered = sorted(rows, key=lambda r: ranking.sort_key(*r))
    assert [r[2] for r in ordered] == [3, 4, 2, 1]  # score desc, then newer, then higher id


def test_quality_update_rule() -> None:
    assert ranking.update_quality(0.0, "helpful", None) == 0.3
    assert ranking.update_quality(0.0, "harmful", None) == -0.3
    assert ranking.update_quality(0.0, "outdated", None) == pytest.approx(-0.18)
    assert ranking.update_quality(0.0, "duplicate", None) == pytest.approx(-0.09)
    assert ranking.update_quality(0.0, "helpful", 0.5) == 0.15  # a score is the signal's value
    q = 0.0
    for _ in range(50):
        q = ranking.update_quality(q, "helpful", None)
    assert 0.99 < q <= 1.0


def test_token_estimate() -> None:
    assert ranking.estimate_tokens("abcdefgh") == 2 and ranking.estimate_tokens("解約API") == 3


def test_the_example_of_docs_ranking() -> None:
    parts = ranking.components([FusedHit(1, 0, 0.8, 0.6), FusedHit(2, 0, 1.0, 1.0)], alpha=0.65)
    assert parts[1].combined == pytest.approx(0.67)
    g = ranking.g(0.9, ranking.recency(60, 120), use_quality=False)
    assert parts[1].combined * g == pytest.approx(0.4738, abs=1e-4)
