"""Pure unit tests of score normalisation and the two fusion methods."""

from __future__ import annotations

import math

import pytest

from memhub.core.errors import ErrorKind, MemhubError
from memhub.search.fusion import FusedHit, fuse, fuse_hits, normalize_scores, reciprocal_rank_fusion


def ids(hits: list[FusedHit]) -> list[int]:
    return [hit.item_id for hit in hits]


class TestNormalize:
    def test_empty(self) -> None:
        assert normalize_scores([]) == []

    def test_single_is_one(self) -> None:
        assert normalize_scores([0.0]) == [1.0]
        assert normalize_scores([-3.5]) == [1.0]

    def test_all_equal_is_one(self) -> None:
        assert normalize_scores([2.0, 2.0, 2.0]) == [1.0, 1.0, 1.0]

    def test_min_max(self) -> None:
        assert normalize_scores([10.0, 5.0, 0.0]) == [1.0, 0.5, 0.0]
        assert normalize_scores([-1.0, 1.0]) == [0.0, 1.0]

    def test_non_finite_do_not_stretch_the_range(self) -> None:
        assert normalize_scores([math.nan, 4.0, 2.0, math.inf, -math.inf]) == [0.0, 1.0, 0.0, 1.0, 0.0]
        assert normalize_scores([math.nan]) == [0.0]


class TestLinear:
    TEXT = ((1, 12.0), (2, 6.0), (3, 0.0))
    VECTOR = ((3, 0.9), (4, 0.5), (1, 0.1))

    def test_combines_both_sides(self) -> None:
        hits = fuse(self.TEXT, self.VECTOR, alpha=0.5, k_final=10)
        by_id = {hit.item_id: hit for hit in hits}
        assert by_id[1] == FusedHit(1, 0.5, 12.0, 0.1)  # text 1.0, vector 0.0
        assert by_id[3].combined == pytest.approx(0.5)  # text 0.0, vector 1.0
        assert by_id[2] == FusedHit(2, 0.25, 6.0, None)  # missing vector side counts 0
        assert by_id[4].combined == pytest.approx(0.5 * 0.5)
        assert by_id[4].text_score is None
        assert ids(hits) == [1, 3, 2, 4]  # 1 and 3 tie at 0.5: lower id first, then 2 vs 4 tie likewise

    def test_alpha_zero_is_text_only(self) -> None:
        assert ids(fuse(self.TEXT, self.VECTOR, alpha=0.0, k_final=10)) == [1, 2, 3]

    def test_alpha_one_is_vector_only(self) -> None:
        assert ids(fuse(self.TEXT, self.VECTOR, alpha=1.0, k_final=10)) == [3, 4, 1]

    def test_alpha_weights_the_sides(self) -> None:
        assert ids(fuse(self.TEXT, self.VECTOR, alpha=0.8, k_final=2)) == [3, 4]
        assert ids(fuse(self.TEXT, self.VECTOR, alpha=0.2, k_final=2)) == [1, 2]

    def test_missing_side_gives_full_weight_to_the_other(self) -> None:
        assert fuse(self.TEXT, [], alpha=0.5, k_final=10) == [
            FusedHit(1, 1.0, 12.0, None),
            FusedHit(2, 0.5, 6.0, None),
            FusedHit(3, 0.0, 0.0, None),
        ]
        assert ids(fuse([], self.VECTOR, alpha=0.3, k_final=10)) == [3, 4, 1]
        assert fuse([], [], alpha=0.5, k_final=10) == []

    def test_ties_break_by_item_id(self) -> None:
        hits = fuse([(9, 1.0), (5, 1.0), (7, 1.0)], [], alpha=0.5, k_final=10)
        assert ids(hits) == [5, 7, 9]
        assert all(hit.combined == 1.0 for hit in hits)

    def test_k_final_truncates(self) -> None:
        assert len(fuse(self.TEXT, self.VECTOR, alpha=0.5, k_final=2)) == 2
        assert fuse(self.TEXT, self.VECTOR, alpha=0.5, k_final=0) == []

    def test_duplicate_ids_keep_best_score(self) -> None:
        hits = fuse([(1, 1.0), (1, 5.0), (2, 3.0)], [], alpha=0.0, k_final=10)
        assert hits[0] == FusedHit(1, 1.0, 5.0, None)

    @pytest.mark.parametrize("alpha", [-0.1, 1.1, math.nan])
    def test_bad_alpha(self, alpha: float) -> None:
        with pytest.raises(MemhubError) as err:
            fuse(self.TEXT, self.VECTOR, alpha=alpha, k_final=10)
        assert err.value.kind is ErrorKind.INVALID


class TestRrf:
    def test_order(self) -> None:
        text = [(1, 9.0), (2, 5.0), (3, 1.0)]
        vector = [(3, 0.9), (1, 0.8), (4, 0.7)]
        hits = reciprocal_rank_fusion(text, vector, k=60, k_final=10)
        assert ids(hits) == [1, 3, 2, 4]
        assert hits[0].combined == pytest.approx(1 / 61 + 1 / 62)
        assert hits[1].combined == pytest.approx(1 / 63 + 1 / 61)
        assert hits[2] == FusedHit(2, pytest.approx(1 / 62), 5.0, None)  # type: ignore[arg-type]

    def test_ranks_come_from_scores_not_input_order(self) -> None:
        assert ids(reciprocal_rank_fusion([(1, 1.0), (2, 2.0)], [], k_final=10)) == [2, 1]

    def test_symmetric_tie_breaks_by_id(self) -> None:
        assert ids(reciprocal_rank_fusion([(8, 1.0)], [(3, 1.0)], k_final=10)) == [3, 8]

    def test_scale_invariant(self) -> None:
        a = reciprocal_rank_fusion([(1, 100.0), (2, 50.0)], [(2, 0.9), (3, 0.1)], k_final=10)
        b = reciprocal_rank_fusion([(1, 1.0), (2, 0.9)], [(2, 0.01), (3, -5.0)], k_final=10)
        assert ids(a) == ids(b) == [2, 1, 3]
        assert [h.combined for h in a] == [h.combined for h in b]


def test_fuse_hits_dispatch() -> None:
    text, vector = [(1, 2.0), (2, 1.0)], [(2, 0.5)]
    assert fuse_hits(text, vector, method="linear", alpha=0.5, k_final=5) == fuse(
        text, vector, alpha=0.5, k_final=5
    )
    assert fuse_hits(text, vector, method="rrf", k_final=5) == reciprocal_rank_fusion(text, vector, k_final=5)
    with pytest.raises(MemhubError):
        fuse_hits(text, vector, method="magic", k_final=5)  # type: ignore[arg-type]
