"""Calibrated similarity (search/calibration.py): pure functions."""

from __future__ import annotations

import math

import pytest

from memhub.search.calibration import (
    AT_P95,
    BASELINES,
    Baseline,
    baseline,
    calibrated,
    cosine_at,
    from_baseline,
    language,
    language_pair,
)

E5USE = "e5+use-75/896"


def test_unrelated_median_is_zero_p99_is_0_7_and_closer_pairs_keep_rising() -> None:
    base = Baseline(0.64, 0.74)
    assert from_baseline(0.64, base) == 0.0
    assert from_baseline(0.50, base) == 0.0  # below the typical unrelated pair
    assert from_baseline(0.74, base) == pytest.approx(AT_P95)
    closer = [from_baseline(c, base) for c in (0.76, 0.80, 0.85, 0.95)]
    assert closer == sorted(closer) and len(set(closer)) == 4  # no clipping at 1: strengths stay comparable
    assert all(0.7 < s < 1.0 for s in closer)
    assert from_baseline(math.nan, base) == 0.0
    assert from_baseline(0.9, Baseline(0.5, 0.5)) == 0.0  # a degenerate baseline links nothing


def test_every_embedder_has_both_modes_for_every_language_pair() -> None:
    for table in BASELINES.values():
        for mode in ("query", "passage"):
            for pair in ("en", "ja", "cross", "any"):
                base = table[(mode, pair)]  # type: ignore[index]
                assert base.p95 > base.median


def test_longest_prefix_mode_and_language_pair_choose_the_baseline() -> None:
    assert baseline(E5USE, "passage", "cross") == BASELINES["e5+use"][("passage", "cross")]
    assert baseline("e5-small-q4/384", "passage", "cross") == BASELINES["e5"][("passage", "cross")]
    assert baseline("unknown/3", "query") is None
    assert calibrated("unknown/3", 1.5) == 1.0 and calibrated("unknown/3", -0.2) == 0.0
    # a cross-language pair of memories sits lower when unrelated: the same cosine means more
    assert calibrated(E5USE, 0.72, "passage", "cross") > calibrated(E5USE, 0.72, "passage", "ja")
    # two memories are more alike than a query and a memory at the same cosine level
    assert calibrated(E5USE, 0.70, "query") > calibrated(E5USE, 0.70, "passage")


def test_cosine_at_inverts_calibrated() -> None:
    for sim in (0.3, 0.7, 0.8, 0.95):
        cos = cosine_at(E5USE, sim, "passage", "en")
        assert calibrated(E5USE, cos, "passage", "en") == pytest.approx(sim)
    assert cosine_at("unknown/3", 0.7) == 0.7


def test_language_of_a_text_and_of_a_pair() -> None:
    assert language("Use structured logging with request ids") == "en"
    assert language("ログは構造化JSONで出力し、request_id を入れる") == "ja"
    assert language("Flyway のマイグレーション V42") == "ja"  # Latin names in a Japanese sentence
    assert language("Flyway の V42") == "en"  # one kana among Latin words: not enough
    assert language("") == "en" and language("1234 !!") == "en"
    assert language_pair("en", "en") == "en" and language_pair("ja", "ja") == "ja"
    assert language_pair("en", "ja") == "cross"
