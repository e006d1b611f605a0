"""Keyword retrieval whose ranking cost stays bounded as the store grows, for every backend.

A text index ranks every row matching a query before it can keep the best few, so a term
found in a quarter of the store makes every query that names it slow, most of the time spent
ranking rows that a rarer term of the same query already outranks. `bounded` picks what to
rank so that about `budget` rows are:

1. the whole OR of the terms matches at most `budget` rows: rank them all;
2. otherwise drop the most frequent terms (their IDF is lowest: they weigh least) until the
   rarer ones match at most `budget` rows, always keeping the rarest;
3. if even that is too many (one very common term), rank only its `budget` newest matches.

Only whether a count is over the budget matters, except when every term is over it: then the
rarest one is kept. So the counts are asked with a cap (`budget + 1`: "more than the budget"),
which a backend may use to stop counting there: a term found in 50,000 of 100,000 rows took
11 ms to count on SQLite, 0.8 ms to count to 3,001 (docs/benchmarks.md). When every term
reaches the cap, the terms still at it are counted on, to a cap four times higher each round,
until one is under it: the rarest. The choice is the same as with exact counts. A backend may
count past the cap where that is cheaper (SQLite: a word's doclist, read in full).

A backend supplies how to count matches and how to OR terms in its query syntax, and reads
"its `budget` newest matches" in the statement that ranks them (a window, `ORDER BY id DESC
LIMIT budget` under the BM25: store/postgres/bm25.py, store/sqlite/fts.py; SQLite's search of a
rare kind puts a cutoff inside that statement instead): one pass over the matches, where
finding first, in a statement of its own, where they start took one more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

# rows ranked by BM25 per query at most, on either backend (SQLite ~4-9 ms at 100k,
# bench/text_budget.py; PostgreSQL the same rows: docs/benchmarks.md)
TEXT_BUDGET = 3_000

# rows matching a query expression, counted up to a cap: a count equal to the cap means "the cap
# or more", any other is exact (a backend may count past the cap: SQLite counts a word in full)
Count = Callable[[str, int], int]
Join = Callable[[Sequence[str]], str]  # terms OR-ed into one expression


def bounded(terms: Sequence[str], budget: int, count: Count, join: Join) -> tuple[str, int]:
    """(expression OR-ing some of `terms`, `window`: 0 to rank every match, else `budget`, to
    rank its `budget` newest matches) that scores ~`budget` rows."""
    if budget < 1:
        raise ValueError("budget must be at least 1")
    expr = join(terms)
    if len(terms) <= 1:
        # no count: its `budget` newest matches are every match when fewer match; the window
        # reads at most `budget` of them where a count reads all
        return expr, budget
    # each term's count first: the OR matches at most their sum and at least their largest,
    # so its own count (the costliest: it merges every doclist) is needed only in between
    cap = budget + 1  # a count capped here tells as much as an exact one...
    found = [count(term, cap) for term in terms]
    if sum(found) <= budget:
        return expr, 0
    if max(found) <= budget and count(expr, cap) <= budget:
        return expr, 0
    while min(found) >= cap:  # ...but for the rarest of terms that are all over the budget
        cap *= 4
        found = [
            count(term, cap) if matches == cap // 4 else matches  # stopped at the last cap
            for term, matches in zip(terms, found, strict=True)
        ]
    counted = sorted((found[position], position, term) for position, term in enumerate(terms))
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
    return expr, budget
