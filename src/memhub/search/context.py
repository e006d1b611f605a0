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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


def contenders(
    scores: Mapping[int, float],
    weights: Mapping[int, float],
    share: float,
    limit: int,
    ceiling: float | None = None,
) -> list[int]:
    """Of the items in `weights` (those that may be ranked), the ones that may rank among the
    first `limit` by `lent score · weight`: their score plus `share` of the best a neighbour
    can lend (`ceiling`, default the best of `scores`), times their weight, reaches the
    `limit`-th best plain `score · weight` (lending never lowers that value)."""
    if not weights or limit <= 0:
        return []
    plain = sorted((scores[i] * w for i, w in weights.items()), reverse=True)
    bar = plain[min(limit, len(plain)) - 1]
    best = max(0.0, max(scores.values()) if ceiling is None else ceiling)
    return [i for i, w in weights.items() if (scores[i] + share * best) * w >= bar]


def lend(scores: Mapping[int, float], near: Mapping[int, Sequence[int]], share: float) -> dict[int, float]:
    """Each score with `share` of its best-scored neighbour's (candidates only), rescaled by
    `1 + share`; `share` 0 leaves the scores as they are."""
    if share <= 0:
        return dict(scores)
    out: dict[int, float] = {}
    for item, score in scores.items():
        best = max((scores.get(other, 0.0) for other in near.get(item, ())), default=0.0)
        out[item] = (score + share * max(0.0, best)) / (1.0 + share)
    return out
