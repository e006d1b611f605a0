"""Graph-first ranking of decisions (seed 002's search policy). Pure functions.

1. `propagate`: candidates found by the hybrid engine lend relevance along supersede links
   (`CHAIN_DECAY` per hop), so the active successor of a matching decision is found even
   when its words differ.
2. `graph_score`: relevance in [0, 1], then by status — active +1.0, superseded ×0.2,
   deprecated ×0.05, draft ×0.4 — and +0.1 authority for a decision a person recorded.
3. `rank`: `strict` keeps active decisions only, `balanced` everything; both keep one
   decision per target (the best active one when the target has one); `audit` keeps every
   decision of every status (no dedup) and the caller adds its supersede chain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

ACTIVE_BOOST = 1.0
PENALTY = {"superseded": 0.2, "deprecated": 0.05, "draft": 0.4}
AUTHORITY = 0.1
CHAIN_DECAY = 0.8  # relevance lent per supersede hop

MODES = ("strict", "balanced", "audit")


@dataclass(frozen=True, slots=True)
class Candidate:
    id: int
    relevance: float  # [0, 1]
    status: str
    human: bool
    target: str  # target_key: the dedup key
    project_id: int | None = None


@dataclass(frozen=True, slots=True)
class Ranked:
    candidate: Candidate
    score: float


def propagate(
    own: Mapping[int, float], edges: Iterable[tuple[int, int]], decay: float = CHAIN_DECAY
) -> dict[int, float]:
    """Relevance of every node of the chains: its own, or a neighbour's times `decay` per hop,
    whichever is higher (a max-product path; nodes without any path get nothing)."""
    adjacent: dict[int, set[int]] = {}
    for a, b in edges:
        adjacent.setdefault(a, set()).add(b)
        adjacent.setdefault(b, set()).add(a)
    best = {node: max(0.0, min(1.0, score)) for node, score in own.items()}
    frontier = set(best)
    while frontier:
        changed: set[int] = set()
        for node in frontier:
            lent = best[node] * decay
            for other in adjacent.get(node, ()):
                if lent > best.get(other, -1.0) + 1e-12:
                    best[other] = lent
                    changed.add(other)
        frontier = changed
    return best


def graph_score(relevance: float, status: str, human: bool) -> float:
    """Seed 002's state-aware score: active +1.0, penalties by status, +0.1 for a person's decision."""
    score = relevance + ACTIVE_BOOST if status == "active" else relevance * PENALTY.get(status, 1.0)
    return score + (AUTHORITY if human else 0.0)


def _order(ranked: list[Ranked]) -> list[Ranked]:
    return sorted(ranked, key=lambda r: (-r.score, -r.candidate.id))


def dedup(ranked: Sequence[Ranked]) -> list[Ranked]:
    """One decision per (project, target): the best active one if the target has one, else the
    best of the others."""
    groups: dict[tuple[int | None, str], list[Ranked]] = {}
    for item in ranked:
        groups.setdefault((item.candidate.project_id, item.candidate.target), []).append(item)
    kept = []
    for members in groups.values():
        active = [m for m in members if m.candidate.status == "active"]
        kept.append(_order(active or members)[0])
    return _order(kept)


def rank(candidates: Iterable[Candidate], mode: str, limit: int) -> list[Ranked]:
    """The best `limit` candidates for `mode` (strict, balanced or audit), best first."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    scored = [Ranked(c, graph_score(c.relevance, c.status, c.human)) for c in candidates]
    if mode == "strict":
        scored = [r for r in scored if r.candidate.status == "active"]
    if mode != "audit":
        scored = dedup(scored)
    return _order(scored)[:limit]


def components(nodes: Iterable[int], edges: Iterable[tuple[int, int]]) -> dict[int, tuple[int, ...]]:
    """Node -> every node of its chain (connected component), oldest (smallest id) first."""
    parent = {node: node for node in nodes}

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for a, b in edges:
        if a in parent and b in parent:
            parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for node in parent:
        groups.setdefault(find(node), []).append(node)
    return {node: tuple(sorted(groups[find(node)])) for node in parent}
