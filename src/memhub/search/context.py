"""Conversation context in the ranking: a memory borrows relevance from the memories stored
next to it. Pure functions over the candidates of one search, plus one read of their links.

A memory stored in a session is temporally linked to the one its author stored just before
it there (services/assoc/memories.py: `association` links of subtype `temporal`), so a
session's memories form a chain in the order they were told. One turn of a conversation
rarely holds a whole answer: "Where did she go?" is answered by the turn after the one that
names the place, and a question about two facts needs two turns. So each candidate's
relevance is lent a share of its best neighbour's:

    lent(c) = (rel(c) + share · max over neighbours n of rel(n)) / (1 + share)

over the candidates only: a neighbour that is not a candidate (not found by either side, or
not visible to the caller) lends nothing, so no hidden memory changes a visible one's rank.
Divided by `1 + share` so the score stays in [0, 1]. Measured in docs/ranking.md.

Only the candidates that could still reach the first `limit` results need their neighbours
(`contenders`): with a rerank weight `w(c)` ≥ 0 (assoc: importance and usage), `c` can only
pass the `limit`-th best `rel · w` if `(rel(c) + share · best rel) · w(c)` reaches it, so the
links are read for those few (tens, not the 200 candidates: one indexed read) and the first
`limit` are exactly what lending over every candidate would give.

A candidate's relevance can be costly (assoc reads its keyword coverage from its text), so
the scores can come as `Bounded`: each known to lie between two cheap bounds and computed
only where the ranking needs it. `contenders` then computes the scores near its bar, and
`lend_best` those of the results a caller reads, best bound first until no bound left can
reach them: the same first results as computing every score (tests/search/test_context.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence

from memhub.store.base import Tx

NEIGHBOUR_LINK = ("association", "temporal")  # (type, subtype) of the links that make neighbours


def neighbours(tx: Tx, ids: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """Item -> the items it is temporally linked with (either direction), for `ids`."""
    if not ids:
        return {}
    link_type, subtype = NEIGHBOUR_LINK
    near: dict[int, list[int]] = {}
    for link in tx.links_of(ids, (link_type,)):
        if link.subtype != subtype or link.src == link.dst:
            continue
        near.setdefault(link.src, []).append(link.dst)
        near.setdefault(link.dst, []).append(link.src)
    return {item: tuple(sorted(set(others))) for item, others in near.items()}


class Bounded:
    """Scores known within bounds and computed exactly only where a ranking needs them (a
    candidate's relevance is costly where its keyword coverage must be read): `low[i] <=
    score(i) <= high[i]` for every item of `high`, which are the items that have a score.
    `Bounded.exact` wraps scores already computed."""

    def __init__(
        self, low: Mapping[int, float], high: Mapping[int, float], score: Callable[[int], float]
    ) -> None:
        self.low, self.high, self._score = low, high, score
        self.known: dict[int, float] = {}

    @classmethod
    def exact(cls, scores: Mapping[int, float]) -> Bounded:
        bounded = cls(scores, scores, scores.__getitem__)
        bounded.known.update(scores)
        return bounded

    def __contains__(self, item: int) -> bool:
        return item in self.high

    def __getitem__(self, item: int) -> float:
        found = self.known.get(item)
        if found is None:
            found = self.known[item] = self._score(item)
        return found

    def best(self, n: int, high: Mapping[int, float], value: Callable[[int], float]) -> dict[int, float]:
        """`value(i)` of the items of `high` (each one's upper bound of it), computed best
        bound first until the `n` best values are known: every item left has a bound below the
        `n`-th best value found (so the `n` best of the result are the `n` best overall, ties
        included). Item -> value for every item computed."""
        found: dict[int, float] = {}
        top: list[float] = []  # a min-heap of the n best values found
        for item in sorted(high, key=high.__getitem__, reverse=True):
            if n > 0 and len(top) >= n and top[0] > high[item]:
                break
            found[item] = got = value(item)
            if len(top) < n:
                heapq.heappush(top, got)
            elif n > 0 and got > top[0]:
                heapq.heapreplace(top, got)
        return found


def contenders(
    scores: Mapping[int, float] | Bounded,
    weights: Mapping[int, float],
    share: float,
    limit: int,
    ceiling: float | None = None,
) -> list[int]:
    """Of the items in `weights` (those that may be ranked), the ones that may rank among the
    first `limit` by `lent score · weight`: their score plus `share` of the best a neighbour
    can lend (`ceiling`, default the best of `scores`), times their weight, reaches the
    `limit`-th best plain `score · weight` (lending never lowers that value). With `Bounded`
    scores, only the scores that decide it are computed."""
    if not weights or limit <= 0:
        return []
    known = scores if isinstance(scores, Bounded) else Bounded.exact(scores)
    # weights are >= 0, so a bound times its weight bounds the weighted score
    plain = known.best(
        limit, {i: known.high[i] * w for i, w in weights.items()}, lambda i: known[i] * weights[i]
    )
    bar = sorted(plain.values(), reverse=True)[min(limit, len(plain)) - 1]
    if ceiling is None:
        ceiling = max(known.best(1, known.high, known.__getitem__).values())
    best = max(0.0, ceiling)
    chosen = []
    for i, w in weights.items():
        if (known.high[i] + share * best) * w < bar:
            continue
        if (known.low[i] + share * best) * w >= bar or (known[i] + share * best) * w >= bar:
            chosen.append(i)
    return chosen


def lend(scores: Mapping[int, float], near: Mapping[int, Sequence[int]], share: float) -> dict[int, float]:
    """Each score with `share` of its best-scored neighbour's (candidates only), rescaled by
    `1 + share`; `share` 0 leaves the scores as they are."""
    if share <= 0:
        return dict(scores)
    return {item: _lent(score, scores, near.get(item, ()), share) for item, score in scores.items()}


def lend_best(
    scores: Bounded,
    near: Mapping[int, Sequence[int]],
    share: float,
    weights: Mapping[int, float],
    n: int,
) -> dict[int, float]:
    """`lend` of the items of `weights` (the neighbours lending are any item of `scores`),
    computed for the `n` best by `lent score · weight` and those whose bound could not rule
    them out first: item -> lent score. Equal to `lend`'s for every item returned."""
    lent: dict[int, float] = {}

    def bound(item: int) -> float:
        lender = max((scores.high[o] for o in near.get(item, ()) if o in scores), default=0.0)
        return (scores.high[item] + share * max(0.0, lender)) / (1.0 + share) * weights[item]

    def weighted(item: int) -> float:
        lent[item] = _lent(scores[item], scores, near.get(item, ()), share)
        return lent[item] * weights[item]

    scores.best(n, {i: bound(i) for i in weights}, weighted)
    return lent


def _lent(score: float, scores: Mapping[int, float] | Bounded, others: Sequence[int], share: float) -> float:
    best = max((scores[other] for other in others if other in scores), default=0.0)
    return (score + share * max(0.0, best)) / (1.0 + share)
