"""Keyword retrieval whose ranking cost stays bounded as the store grows, for every backend.

A text index ranks every row matching a query before it can keep the best few, so a term
found in a quarter of the store makes every query that names it slow, most of the time spent
ranking rows that a rarer term of the same query already outranks. `bounded` picks what to
rank so that about `budget` rows are:

1. the whole OR of the terms matches at most `budget` rows: rank them all;
2. otherwise drop the most frequent terms (their IDF is lowest: they weigh least) until the
   rarer ones match at most `budget` rows, always keeping the rarest;
3. if even that is too many (one very common term), rank only its `budget` newest matches.

A backend supplies how to count matches, how to OR terms in its query syntax and where the
`budget` newest matches start (store/sqlite/fts.py, store/postgres/text.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Count = Callable[[str], int]  # rows matching a query expression
Join = Callable[[Sequence[str]], str]  # terms OR-ed into one expression
# how the backend names "only the `budget` newest matches" (0: every match): PostgreSQL the
# lowest id among them (0 when fewer match), SQLite `budget` itself (a window of its ranking
# statement: store/sqlite/fts.py)
Newest = Callable[[str, int], int]


def bounded(terms: Sequence[str], budget: int, count: Count, join: Join, newest: Newest) -> tuple[str, int]:
    """(expression OR-ing some of `terms`, `newest`: 0 to rank every match, else what the backend's
    `newest` named for its newest `budget` matches) that scores ~`budget` rows."""
    if budget < 1:
        raise ValueError("budget must be at least 1")
    expr = join(terms)
    if len(terms) <= 1:
        # no count: where the `budget` newest matches start is 0 when fewer match, and the
        # lowest match when exactly `budget` do (the same rows); it reads at most `budget`
        # matches where a count reads all of them
        return expr, newest(expr, budget)
    # each term's count first: the OR matches at most their sum and at least their largest,
    # so its own count (the costliest: it merges every doclist) is needed only in between
    counted = sorted((count(term), position, term) for position, term in enumerate(terms))
    if sum(matches for matches, _, _ in counted) <= budget:
        return expr, 0
    if counted[-1][0] <= budget and count(expr) <= budget:
        return expr, 0
    kept: list[tuple[int, str]] = []
    total = 0
    for matches, position, term in counted:  # rarest first
        if kept and total + matches > budget:
            break
        kept.append((position, term))
        total += matches
    expr = join([term for _, term in sorted(kept)])
    if total <= budget:
        return expr, 0
    return expr, newest(expr, budget)
