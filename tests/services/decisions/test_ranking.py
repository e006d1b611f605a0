"""Seed 002's graph ranking as pure functions: propagation along chains, status scores, modes."""

from __future__ import annotations

import pytest

from memhub.core.ids import DEC
from memhub.services.decision_model import target_key
from memhub.services.decisions.ranking import (
    Candidate,
    components,
    dedup,
    graph_score,
    propagate,
    rank,
)


def test_graph_score_boosts_active_and_penalises_the_rest() -> None:
    assert graph_score(0.5, "active", human=False) == pytest.approx(1.5)
    assert graph_score(0.5, "superseded", human=False) == pytest.approx(0.1)
    assert graph_score(0.5, "deprecated", human=False) == pytest.approx(0.025)
    assert graph_score(0.5, "draft", human=False) == pytest.approx(0.2)
    assert graph_score(0.5, "active", human=True) == pytest.approx(1.6)  # authority
    assert graph_score(0.5, "superseded", human=True) == pytest.approx(0.2)
    # an active decision always beats any other status, however weak its match
    assert graph_score(0.0, "active", human=False) > graph_score(1.0, "draft", human=True)


def test_propagate_lends_relevance_along_chains() -> None:
    # 1 -> 2 -> 3 (supersedes), 4 alone; only 1 and 4 were hits
    got = propagate({1: 1.0, 4: 0.3}, [(2, 1), (3, 2)])
    assert got == pytest.approx({1: 1.0, 2: 0.8, 3: 0.64, 4: 0.3})
    # a node's own relevance wins when higher than what it is lent
    assert propagate({1: 1.0, 2: 0.9}, [(2, 1)]) == pytest.approx({1: 1.0, 2: 0.9})
    assert propagate({1: 0.5, 2: 0.1}, [(2, 1)]) == pytest.approx({1: 0.5, 2: 0.4})
    assert propagate({}, [(1, 2)]) == {}


def _c(i: int, rel: float, status: str, target: str = "t", human: bool = False) -> Candidate:
    return Candidate(i, rel, status, human, target)


def test_strict_never_returns_a_non_active_decision() -> None:
    cands = [_c(1, 1.0, "superseded", "a"), _c(2, 1.0, "deprecated", "b"), _c(3, 1.0, "draft", "c")]
    assert rank(cands, "strict", 5) == []
    got = rank([*cands, _c(4, 0.01, "active", "d")], "strict", 5)
    assert [r.candidate.id for r in got] == [4]


def test_balanced_keeps_the_best_active_version_per_target() -> None:
    cands = [
        _c(1, 1.0, "superseded"),
        _c(2, 0.3, "active"),
        _c(3, 0.6, "active"),
        _c(4, 0.9, "draft", "other"),
        _c(5, 0.2, "superseded", "old"),
        _c(6, 0.4, "superseded", "old"),
    ]
    got = rank(cands, "balanced", 5)
    assert [(r.candidate.id, round(r.score, 6)) for r in got] == [(3, 1.6), (4, 0.36), (6, 0.08)]


def test_dedup_is_per_project() -> None:
    a = Candidate(1, 1.0, "active", False, "t", project_id=1)
    b = Candidate(2, 0.5, "active", False, "t", project_id=2)
    assert len(dedup([r for r in rank([a, b], "audit", 5)])) == 2


def test_audit_returns_every_status_and_respects_the_limit() -> None:
    cands = [_c(1, 1.0, "superseded"), _c(2, 0.8, "active"), _c(3, 0.5, "deprecated", human=True)]
    got = rank(cands, "audit", 5)
    assert [(r.candidate.id, round(r.score, 6)) for r in got] == [(2, 1.8), (1, 0.2), (3, 0.125)]
    assert len(rank(cands, "audit", 2)) == 2
    with pytest.raises(ValueError):
        rank(cands, "loose", 5)


def test_components_are_whole_chains_oldest_first() -> None:
    got = components([1, 2, 3, 4, 5], [(2, 1), (3, 2), (5, 4)])
    assert got[1] == got[3] == (1, 2, 3)
    assert got[4] == (4, 5)


def test_ids_and_targets() -> None:
    assert DEC(42) == "dec_42"
    assert DEC.parse("dec_42") == DEC.parse("42") == 42
    assert DEC.parse("dec_0") is None and DEC.parse("x") is None and DEC.parse("dec_４２") is None
    assert target_key(" Database_Policy ") == target_key("database  policy") == "database policy"
