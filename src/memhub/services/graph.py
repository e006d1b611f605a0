"""The one graph walk: breadth first over typed links, through the visibility filter.

Associations (get_related, the memory map), supersede chains, claim relations and vault
wiki-links are all walked here. Each hop reads the links of the current frontier (both
directions), keeps only endpoints the viewer may read, and reaches each new item by its
strongest path (the product of link strengths along it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memhub.core.models import Viewer
from memhub.store.base import LinkRow, Tx


@dataclass(frozen=True, slots=True)
class Reached:
    depth: int  # hops from the nearest start (0: a start)
    strength: float  # product of link strengths along the strongest path
    via: str  # subtype (or type) of the last hop's link; "" for a start


@dataclass
class Walk:
    starts: tuple[int, ...]
    reached: dict[int, Reached] = field(default_factory=dict)  # starts included
    edges: dict[int, LinkRow] = field(
        default_factory=dict
    )  # link id -> link between reached-or-visible items

    def found(self) -> list[int]:
        """Reached items other than the starts: nearest first, then strongest, then by id."""
        others = [item for item in self.reached if item not in self.starts]
        return sorted(others, key=lambda i: (self.reached[i].depth, -self.reached[i].strength, i))


def walk(
    tx: Tx,
    viewer: Viewer,
    starts: Sequence[int],
    types: Sequence[str],
    *,
    depth: int,
    kinds: Sequence[str] = (),
    max_nodes: int | None = None,
) -> Walk:
    """Items within `depth` hops of `starts` over links of `types`, that `viewer` may read.

    `max_nodes` caps the reached items (starts included); links are read strongest first, so
    the cap keeps the strongest neighbours. Links between two readable items are kept in
    `edges` (a memory map draws them).
    """
    result = Walk(starts=tuple(starts))
    result.reached = {item: Reached(0, 1.0, "") for item in starts}
    frontier = list(dict.fromkeys(starts))
    for hop in range(1, depth + 1):
        links = tx.links_of(frontier, types)
        ends = {end for link in links for end in (link.src, link.dst)}
        readable = tx.visible_ids(viewer, sorted(ends), kinds, None)
        in_frontier = set(frontier)
        new: dict[int, Reached] = {}
        for link in links:
            if link.src not in readable or link.dst not in readable:
                continue
            result.edges[link.id] = link
            for here, there in ((link.src, link.dst), (link.dst, link.src)):
                if here not in in_frontier or there in result.reached:
                    continue
                strength = result.reached[here].strength * link.strength
                known = new.get(there)
                if known is None:
                    if max_nodes is not None and len(result.reached) + len(new) >= max_nodes:
                        continue
                    new[there] = Reached(hop, strength, link.subtype or link.type)
                elif known.strength < strength:
                    new[there] = Reached(hop, strength, link.subtype or link.type)
        result.reached.update(new)
        frontier = list(new)
        if not frontier:
            break
    return result
