"""Calibrated similarity (search/calibration.py): pure functions; two memories scored model by
model (issue 23)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memhub.search.calibration import (
    ASSOCIATION_WEIGHTS,
    AT_P95,
    BASELINES,
    LEXICAL_WEIGHT,
    PAIR_BASELINES,
    Baseline,
    LanguagePair,
    Part,
    baseline,
    calibrated,
    cosine_at,
    from_baseline,
    language,
    language_pair,
    mixed_z,
    overlap,
    pair_similarity,
    part_cosines,
    parts,
    stacked,
    terms,
)
from memhub.search.embedders.combined import CombinedEmbedder
from memhub.search.embedders.hashing import HashingEmbedder

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


# -- two memories, model by model (pair_similarity) -------------------------------------------


def _unit(*values: float) -> np.ndarray:
    vec = np.asarray(values, dtype=np.float32)
    return (vec / np.linalg.norm(vec)).astype(np.float32)


def _pair_at(cos: float) -> tuple[np.ndarray, np.ndarray]:
    """Two 2-d unit vectors whose cosine is `cos`."""
    return _unit(1.0, 0.0), _unit(cos, math.sqrt(max(0.0, 1.0 - cos * cos)))


def _joined(e5: np.ndarray, use: np.ndarray, weight: float = 0.75) -> np.ndarray:
    return np.concatenate([math.sqrt(weight) * e5, math.sqrt(1.0 - weight) * use]).astype(np.float32)


LAYOUT = (Part("e5-small-q4/384", 0, 2, 0.75), Part("use-m3/512", 2, 4, 0.25))


def test_parts_of_the_default_embedder_are_its_two_models_slices() -> None:
    combined = CombinedEmbedder(HashingEmbedder(16), HashingEmbedder(8), 0.75, name="pair")
    assert parts(combined) == (Part("hash-v1/16", 0, 16, 0.75), Part("hash-v1/8", 16, 24, 0.25))
    assert parts(HashingEmbedder(32)) == (Part("hash-v1/32", 0, 32, 1.0),)
    # each model's own cosine is read back off the joined vectors
    e5a, e5b = _pair_at(0.8)
    usea, useb = _pair_at(0.1)
    cosines = part_cosines(LAYOUT, _joined(e5a, usea), _joined(e5b, useb))
    assert cosines == pytest.approx([0.8, 0.1], abs=1e-6)


def test_pair_similarity_mixes_each_models_calibrated_z() -> None:
    e5, use = BASELINES["e5"][("passage", "cross")], BASELINES["use"][("passage", "cross")]
    mixed = PAIR_BASELINES[("e5", "use")]["cross"]

    def sim(e5_cos: float, use_cos: float, pair: LanguagePair = "cross") -> float:
        (a1, b1), (a2, b2) = _pair_at(e5_cos), _pair_at(use_cos)
        return pair_similarity(LAYOUT, _joined(a1, a2), _joined(b1, b2), pair)

    assert sim(e5.median, use.median) == 0.0  # both models see a typical unrelated pair
    # both at their unrelated 95th percentile: mixed z 1, beyond the mix's own p95
    assert sim(e5.p95, use.p95) == pytest.approx(from_baseline(1.0, mixed), abs=1e-4)
    assert sim(e5.p95, use.p95) > AT_P95
    # USE carries 0.7 of the score: the same z on USE's side counts more than on e5's
    z = 1.5
    e5_only = sim(e5.median + z * (e5.p95 - e5.median), use.median)
    use_only = sim(e5.median, use.median + z * (use.p95 - use.median))
    assert use_only > e5_only > 0.0
    # the language pair chooses the baselines: a cross pair at the same cosines means more
    assert sim(0.84, 0.3, "cross") > sim(0.84, 0.3, "ja")
    # an absolute, comparable score: closer pairs keep rising below 1
    closer = [sim(c, u) for c, u in ((0.86, 0.35), (0.9, 0.5), (0.95, 0.8))]
    assert closer == sorted(closer) and all(s < 1.0 for s in closer)
    assert ASSOCIATION_WEIGHTS == {"e5": 0.3, "use": 0.7}


def test_pair_similarity_of_one_model_or_an_unknown_one() -> None:
    a, b = _pair_at(0.5)
    one = (Part("hash-v1/2", 0, 2),)
    assert pair_similarity(one, a, b, "en") == pytest.approx(calibrated("hash-v1/2", 0.5, "passage", "en"))
    unknown = (Part("mystery/2", 0, 2),)
    assert pair_similarity(unknown, a, b) == pytest.approx(0.5)  # the clipped cosine
    assert mixed_z(unknown, a, b) is None


def test_overlap_is_the_dice_share_of_content_terms_in_both_scripts() -> None:
    assert terms("Retry the upload with a backoff") == {"retry", "upload", "backoff"}  # no stop words
    assert terms("毎分100リクエスト") >= {"毎分", "100", "リク"}  # CJK as bigrams, as the index sees it
    assert overlap("Flyway migration V42", "flyway MIGRATION v42") == 1.0  # normalised
    assert overlap("Flyway migration V42", "Tomatoes need watering") == 0.0
    shared = overlap("Flyway migration V42", "V42 を本番で流す")
    assert shared == pytest.approx(2 * 1 / (3 + 6))  # v42 and 5 bigrams
    assert overlap("", "") == 0.0


def test_shared_terms_raise_the_similarity_of_two_memories_of_a_model_pair_only() -> None:
    e5, use = BASELINES["e5"][("passage", "en")], BASELINES["use"][("passage", "en")]
    (a1, b1), (a2, b2) = _pair_at(e5.p95), _pair_at(use.p95)
    a, b = _joined(a1, a2), _joined(b1, b2)
    plain = mixed_z(LAYOUT, a, b, "en")
    assert plain is not None
    assert mixed_z(LAYOUT, a, b, "en", 0.5) == pytest.approx(plain + LEXICAL_WEIGHT * 0.5)
    rising = [pair_similarity(LAYOUT, a, b, "en", shared) for shared in (0.0, 0.25, 0.5)]
    assert rising == sorted(rising) and rising[0] < rising[-1] < 1.0
    # a single model keeps its own passage calibration: the overlap is not added there
    one = (Part("hash-v1/2", 0, 2),)
    x, y = _pair_at(0.5)
    assert pair_similarity(one, x, y, "en", 0.9) == pair_similarity(one, x, y, "en")


def test_profiles_are_remembered_within_a_budget_of_terms() -> None:
    """The memo of profiles is bounded by the terms it holds, not by a count of texts: long
    Japanese texts (a term per character) cannot grow it past TERMS_KEPT."""
    from memhub.search import calibration

    kanji = [chr(0x4E00 + i) for i in range(3000)]
    texts = ["".join(kanji[(n * 7 + i * 13) % 3000] for i in range(900)) for n in range(300)]
    for text in texts:
        made = calibration.profile(text)
        assert made == calibration.Profile(language(text), terms(text))
        assert calibration.profile(text) is made  # asked again at once: remembered
    memo = calibration._PROFILES
    assert 0 < memo.held <= calibration.TERMS_KEPT
    assert memo.held == sum(len(p.terms) + 1 for p in memo.kept.values())
    assert texts[0] not in memo.kept and texts[-1] in memo.kept  # the oldest went first
    long = "設定" * (calibration.PROFILE_KEPT_CHARS // 2 + 1)
    assert calibration.profile(long) == calibration.Profile("ja", terms(long)) and long not in memo.kept


def test_stacked_leaves_out_damaged_vectors_of_every_kind() -> None:
    """The one decoder of stored vectors (linking, `similar`, diversity, explain): a blob of
    another length, or one holding NaN or infinity, is left out; the rest keep their order."""
    good = {i: np.full(4, float(i), dtype="<f4").tobytes() for i in (1, 2, 5)}
    blobs = {
        **good,
        3: np.array([1.0, np.nan, 0.0, 0.0], dtype="<f4").tobytes(),
        4: np.array([np.inf, 0.0, 0.0, 0.0], dtype="<f4").tobytes(),
        6: b"\x00" * 12,
    }
    ids, matrix = stacked([5, 4, 3, 2, 6, 7, 1], blobs, 4)
    assert ids == [5, 2, 1] and matrix.shape == (3, 4)
    assert matrix[:, 0].tolist() == [5.0, 2.0, 1.0]
    assert stacked([1, 2], good, 4)[0] == [1, 2]
