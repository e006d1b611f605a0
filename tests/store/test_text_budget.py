"""store/sql/budget.py: what `bounded` chooses to rank, and which counts it asks for."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from memhub.store.sql.budget import Count, bounded

MATCHES = {"a": set(range(0, 50)), "b": set(range(40, 100)), "c": set(range(0, 5000)), "d": {7}}


def _matches(expr: str, matches: dict[str, set[int]]) -> int:
    return len(set().union(*(matches[t] for t in expr.split("|"))))


def _run(
    terms: Sequence[str],
    budget: int,
    matches: dict[str, set[int]] = MATCHES,
    *,
    capped: bool | Callable[[str], bool] = True,
) -> tuple[tuple[str, int], list[str]]:
    """What `bounded` chooses, and the expressions it counts; `capped`: the count stops at the
    cap it is given (for the expressions it says), else it is exact (a backend may return more
    than the cap)."""
    asked: list[str] = []

    def count(expr: str, cap: int) -> int:
        asked.append(expr)
        found = _matches(expr, matches)
        stops = capped(expr) if callable(capped) else capped
        return min(found, cap) if stops else found

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


def test_capped_counts_choose_what_exact_counts_choose() -> None:
    rng = random.Random(5)
    for _ in range(400):
        matches = {
            name: set(rng.sample(range(400), rng.choice([0, 1, 3, 20, 60, 99, 100, 101, 150, 390, 400])))
            for name in "abcdef"
        }
        terms = rng.choices(sorted(matches), k=rng.randint(1, 5))  # a term may come twice
        budget = rng.choice([1, 50, 100, 200])
        exact = _run(terms, budget, matches, capped=False)[0]
        assert _run(terms, budget, matches)[0] == exact
        assert _run(terms, budget, matches, capped=lambda expr: expr[0] in "ace")[0] == exact


def test_counts_stop_at_the_budget_and_go_further_only_when_every_term_is_over_it() -> None:
    caps: list[int] = []

    def count_in(matches: dict[str, set[int]]) -> Count:
        def count(expr: str, cap: int) -> int:
            caps.append(cap)
            return min(_matches(expr, matches), cap)

        return count

    assert bounded(["a", "c", "d"], 100, count_in(MATCHES), "|".join) == ("a|d", 0)
    assert caps == [101, 101, 101]  # c is over the budget: 101 tells as much as 5000
    caps.clear()
    many = {"x": set(range(300)), "y": set(range(200)), "z": set(range(500))}
    assert bounded(["x", "y", "z"], 100, count_in(many), "|".join) == ("y", 100)
    # every term over the budget: counted on, 4x further, until one is under the cap (the rarest)
    assert caps == [101, 101, 101, 404, 404, 404]
    caps.clear()
    far = {"x": set(range(1000)), "y": set(range(2000)), "z": set(range(999))}
    assert bounded(["x", "y", "z"], 100, count_in(far), "|".join) == ("z", 100)
    assert caps == [101] * 3 + [404] * 3 + [1616] * 3
