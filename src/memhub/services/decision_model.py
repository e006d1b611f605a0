"""One decision model for every toolset that records or reads decisions (seeds 002 and 004).

A decision is an `items` row of kind `decision` in project scope: `title` is the decision,
`body` its rationale (seed 004's reason), `parent_id` the topic it closes (if any), and
`attrs` hold the `target` (what the decision is about: the key of dedup and supersede
chains), `origin` (which toolset wrote it), `via` ("mcp": an agent; "cli": a person) and
`consequences` (a list of strings). Its text never changes: status is derived, not stored.

Agent decisions are shown with the `[via MCP]` marker (`marked`); the truth is `attrs.via`,
never the text, so a person cannot lose authority by quoting the marker.

Status: `superseded` when a later decision links to it with `supersedes`, `deprecated`
when a `deprecates` link points at it, `draft` when it was recorded as a draft, else
`active`. A `supersedes` link goes from the new decision to the one it replaces.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memhub.core.hashing import content_hash
from memhub.core.ids import DEC
from memhub.core.models import Kind, Principal, Scope, Viewer
from memhub.services import graph
from memhub.store.base import ItemRow, NewItem, Tx

SUPERSEDES = "supersedes"  # new decision -> the decision it replaces
DEPRECATES = "deprecates"  # a deprecation record -> the decision it retires
STATUSES = ("active", "superseded", "deprecated", "draft")
VIA_MCP = "[via MCP]"  # how an agent's decision is shown (seed 002)


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    id: int
    project_id: int | None
    topic_id: int | None
    title: str
    rationale: str
    target: str
    status: str
    supersedes: tuple[int, ...]
    superseded_by: tuple[int, ...]
    author: str
    via: str  # "mcp" (an agent) or "cli" (a person)
    origin: str  # the toolset that recorded it
    created_at: str
    consequences: tuple[str, ...] = ()

    @property
    def human(self) -> bool:
        return self.via != "mcp"

    @property
    def public_id(self) -> str:
        """`dec_42`: how the decisions toolset shows a decision id (discussion shows 42)."""
        return DEC(self.id)


def marked(text: str, via: str) -> str:
    """`text [via MCP]` for an agent's decision, `text` for a person's."""
    return f"{text} {VIA_MCP}" if via == "mcp" else text


def target_key(target: str) -> str:
    """The identity of a target for dedup and reflection: NFKC, case-folded, `_` and `-` read
    as spaces, spaces squeezed (`database_policy` and `Database Policy` are one target)."""
    text = unicodedata.normalize("NFKC", target).casefold().replace("_", " ").replace("-", " ")
    return " ".join(text.split())


def target_of(row: ItemRow) -> str:
    """What the decision is about. Decisions recorded before targets existed fall back to
    their own text."""
    target = row.attrs.get("target")
    return str(target) if target else (row.title or "")


@dataclass(frozen=True, slots=True)
class NewDecision:
    """A decision to record, whichever toolset records it."""

    project_id: int
    title: str
    rationale: str
    target: str  # what it is about: the key of dedup and supersede chains
    origin: str  # the toolset (or "proposal") that records it
    topic_id: int | None = None  # the discussion topic it closes
    consequences: Sequence[str] = ()
    draft: bool = False
    supersedes: Sequence[int] = ()  # the decisions it replaces
    extra: Mapping[str, Any] = field(default_factory=dict)  # more attrs (the proposal it came from)


def create(tx: Tx, actor: Principal, new: NewDecision) -> ItemRow:
    """Record one decision (and its `supersedes` links) in the caller's transaction."""
    attrs: dict[str, Any] = {**new.extra, "origin": new.origin, "via": actor.via, "target": new.target}
    if new.consequences:
        attrs["consequences"] = list(new.consequences)
    if new.draft:
        attrs["draft"] = True
    row = tx.insert_item(
        NewItem(
            kind=Kind.DECISION,
            owner=actor.id,
            scope=Scope.PROJECT,
            project_id=new.project_id,
            parent_id=new.topic_id,
            title=new.title,
            body=new.rationale,
            attrs=attrs,
            content_hash=content_hash(new.title, new.rationale),
        )
    )
    for old in new.supersedes:
        tx.upsert_link(row.id, old, SUPERSEDES, None, 1.0)
    return row


def deprecate(tx: Tx, actor: Principal, decision: DecisionRecord, reason: str) -> ItemRow:
    """Retire a decision without a successor: a deprecation record (kind `deprecation`, in the
    decision's project) linked to it with `deprecates`. The decision's text is untouched."""
    assert decision.project_id is not None
    row = tx.insert_item(
        NewItem(
            kind=Kind.DEPRECATION,
            owner=actor.id,
            scope=Scope.PROJECT,
            project_id=decision.project_id,
            title=f"deprecates {DEC(decision.id)}",
            body=reason,
            attrs={"via": actor.via},
            content_hash=content_hash(str(decision.id), reason),
        )
    )
    tx.upsert_link(row.id, decision.id, DEPRECATES, None, 1.0)
    return row


def chains(
    tx: Tx, viewer: Viewer, starts: Sequence[int], *, depth: int = 10, max_nodes: int = 500
) -> graph.Walk:
    """The supersede chains through `starts`: every decision the viewer may read within `depth`
    `supersedes` hops (either direction), with the links between them (the one graph walk)."""
    return graph.walk(
        tx, viewer, starts, [SUPERSEDES], depth=depth, kinds=(Kind.DECISION,), max_nodes=max_nodes
    )


def records(tx: Tx, rows: Sequence[ItemRow]) -> list[DecisionRecord]:
    """Decision rows with their derived status and supersede links, in the given order."""
    ids = [row.id for row in rows]
    links = tx.links_of(ids, [SUPERSEDES, DEPRECATES]) if ids else []
    supersedes: dict[int, list[int]] = {i: [] for i in ids}
    superseded_by: dict[int, list[int]] = {i: [] for i in ids}
    deprecated: set[int] = set()
    for link in links:
        if link.type == SUPERSEDES:
            if link.src in supersedes:
                supersedes[link.src].append(link.dst)
            if link.dst in superseded_by:
                superseded_by[link.dst].append(link.src)
        elif link.dst in superseded_by:
            deprecated.add(link.dst)
    return [
        _record(row, sorted(supersedes[row.id]), sorted(superseded_by[row.id]), row.id in deprecated)
        for row in rows
    ]


def _record(
    row: ItemRow, supersedes: list[int], superseded_by: list[int], deprecated: bool
) -> DecisionRecord:
    if superseded_by:
        status = "superseded"
    elif deprecated:
        status = "deprecated"
    elif row.attrs.get("draft"):
        status = "draft"
    else:
        status = "active"
    consequences = row.attrs.get("consequences") or ()
    if isinstance(consequences, str):
        consequences = (consequences,)
    return DecisionRecord(
        id=row.id,
        project_id=row.project_id,
        topic_id=row.parent_id,
        title=row.title or "",
        rationale=row.body,
        target=target_of(row),
        status=status,
        supersedes=tuple(supersedes),
        superseded_by=tuple(superseded_by),
        author=row.owner,
        via=str(row.attrs.get("via", "mcp")),
        origin=str(row.attrs.get("origin", "discussion")),
        created_at=row.created_at,
        consequences=tuple(str(c) for c in consequences),
    )
