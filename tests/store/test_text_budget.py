"""store/sql/budget.py: what `bounded` chooses to rank, and which counts it asks for."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memhub.store.sql.budget import bounded

MATCHES = {"a": set(range(0, 50)), "b": set(range(40, 100)), "c": set(range(0, 5000)), "d": {7}}


def _run(terms: Sequence[str], budget: int) -> tuple[tuple[str, int], list[str]]:
    asked: list[str] = []

    def count(expr: str) -> int:
        asked.append(expr)
        return len(set().union(*(MATCHES[t] for t in expr.split("|"))))

    return bounded(terms, budget, count, "|".join), asked


@pytest.mark.parametrize(
    ("terms", "budget", "chosen"),
    [
        (["a", "b"], 100, ("a|b", 0)),  # the sum (110) is over, the union (100) is not: rank all
        (["a", "b"], 200, ("a|b", 0)),
        (["a", "c", "d"], 100, ("a|d", 0)),  # the common term dropped
        (["c"], 100, ("c", 100)),  # one common term: its 100 newest matches only
        (["c", "d"], 100, ("d", 0)),
    ],
)
def test_the_chosen_expression(terms: list[str], budget: int, chosen: tuple[str, int]) -> None:
    assert _run(terms, budget)[0] == chosen


def test_the_union_is_not_counted_when_a_term_alone_is_over_the_budget_or_the_sum_is_under() -> None:
    assert "a|c|d" not in _run(["a", "c", "d"], 100)[1]  # c alone: 5000
    assert "a|d" not in _run(["a", "d"], 100)[1]  # 51 at most
    assert "a|b" in _run(["a", "b"], 100)[1]  # 60..110: only the union's count tells


def test_one_term_is_not_counted_its_newest_matches_are_a_window() -> None:
    assert _run(["c"], 100) == (("c", 100), [])
    assert _run(["a"], 100) == (("a", 100), [])  # fewer match than the window: every row
