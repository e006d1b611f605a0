"""Single records as the dashboard shows them: an item with its links, a decision with its
supersede timeline, the proposals queue, a project's topic tree and a topic's logs.

Every read goes through the caller's viewer (the store's one visibility filter) and the
access rules; a record the caller may not see is "not found", whatever the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memhub.core.errors import forbidden, not_found
from memhub.core.ids import DEC
from memhub.core.models import Kind, Principal, Viewer
from memhub.policy.redact import PII_KINDS, SECRET_KINDS, redact
from memhub.services import access, decision_model
from memhub.services.access import Need
from memhub.services.decision_model import DecisionRecord
from memhub.services.decisions import proposals
from memhub.services.discussion import models as dm
from memhub.services.discussion import service as discussion
from memhub.services.runtime import Call
from memhub.store.base import EventRow, ItemQuery, ItemRow, ProjectRow, Tx

MAX_LINKS = 50
HISTORY_PAGE = 20
HISTORY_SCAN = 5_000  # audit events one history page reads at most
COVERAGE_TOOL = "vault_coverage"


@dataclass(frozen=True)
class Link:
    other: int
    kind: str
    title: str
    type: str
    subtype: str | None
    strength: float
    outgoing: bool


@dataclass(frozen=True)
class Item:
    row: ItemRow
    project: str | None
    links: list[Link]
    decision: DecisionRecord | None
    timeline: list[DecisionRecord]  # a decision's supersede chain, oldest first


def public_id(row: ItemRow) -> str:
    prefix = {"memory": "mem", "claim": "clm", "decision": "dec", "vault_note": "note"}.get(
        row.kind, row.kind
    )
    return f"{prefix}_{row.id}"


def item(tx: Tx, principal: Principal, item_id: int) -> Item:
    viewer = access.viewer(tx, principal)
    row = tx.get_item(viewer, item_id)
    if row is None:
        raise not_found(f"item {item_id} not found")
    if row.kind == Kind.CLAIM:  # pce never sends a claim's secrets; a person's page masks its pii too
        kinds = (*SECRET_KINDS, *PII_KINDS)
        row = replace(row, body=redact(row.body, kinds)[0], title=row.title and redact(row.title, kinds)[0])
    project = tx.get_project(row.project_id) if row.project_id is not None else None
    links = visible_links(tx, viewer, row.id)
    decision: DecisionRecord | None = None
    timeline: list[DecisionRecord] = []
    if row.kind == Kind.DECISION:
        decision = decision_model.records(tx, [row])[0]
        timeline = chain(tx, principal, row.id)
    return Item(row, project.name if project else None, links, decision, timeline)


def visible_links(tx: Tx, viewer: Viewer, item_id: int) -> list[Link]:
    """The first MAX_LINKS links of an item whose other end the viewer may read: links are read
    in chunks until that many are found, so links to items the viewer cannot see never crowd
    out the ones it can."""
    edges = tx.links_of([item_id], ())
    links: list[Link] = []
    step = MAX_LINKS * 4
    for start in range(0, len(edges), step):
        chunk = edges[start : start + step]
        others = sorted({e.dst if e.src == item_id else e.src for e in chunk})
        seen = tx.query_items(viewer, ItemQuery(ids=others, limit=len(others)))
        titles = {r.id: (r.kind, r.title or r.body[:80]) for r in seen}
        for edge in chunk:
            other = edge.dst if edge.src == item_id else edge.src
            if other in titles:
                kind, title = titles[other]
                outgoing = edge.src == item_id
                links.append(Link(other, kind, title, edge.type, edge.subtype, edge.strength, outgoing))
                if len(links) == MAX_LINKS:
                    return links
    return links


@dataclass(frozen=True)
class Happened:
    """One audit event naming an item, as its history shows it (no detail: the detail may
    name other items the reader may not see)."""

    id: int
    at: str
    principal: str
    tool: str
    outcome: str


@dataclass(frozen=True)
class History:
    events: list[Happened]  # newest first
    next_before: int | None  # the `before` of the next (older) page


def history(tx: Tx, principal: Principal, item_id: int, before: int | None) -> History:
    """The audit events whose detail names the item (its public id, `mem_12`), newest first,
    a page at a time; only for an item `principal` may read ("not found" otherwise)."""
    row = tx.get_item(access.viewer(tx, principal), item_id)
    if row is None:
        raise not_found(f"item {item_id} not found")
    events, next_before = tx.events_page(
        before=before, limit=HISTORY_PAGE, scan=HISTORY_SCAN, mentions=public_id(row)
    )
    return History([_happened(e) for e in events], next_before)


@dataclass(frozen=True)
class Coverage:
    """The newest `vault_coverage` result for a note, as the vault service computed and
    audited it (not recomputed here)."""

    at: str
    ratio: float
    covered: list[tuple[int, int]]  # line ranges (at most the 100 the audit keeps of each)
    uncovered: list[tuple[int, int]]


def note_coverage(tx: Tx, principal: Principal, path: str) -> Coverage | None:
    """The coverage `principal` last computed for the vault note at `path` (its relative path
    as the vault tools report it), from the audit log's `vault_coverage` events; None when none
    is among the newest `HISTORY_SCAN` events. Callers have read the note as `principal`."""
    events, _ = tx.events_page(
        before=None, limit=HISTORY_PAGE, scan=HISTORY_SCAN, principal=principal.id,
        tool_prefix=COVERAGE_TOOL, outcome="ok", mentions=path,
    )  # fmt: skip
    for event in events:
        detail = event.detail
        if event.tool == COVERAGE_TOOL and detail.get("path") == path:
            return Coverage(
                event.at, float(detail.get("coverage_ratio", 0.0)),
                _ranges(detail.get("covered_ranges")), _ranges(detail.get("uncovered_ranges")),
            )  # fmt: skip
    return None


def _ranges(value: object) -> list[tuple[int, int]]:
    if not isinstance(value, list):
        return []
    return [
        (int(r["start_line"]), int(r["end_line"]))
        for r in value
        if isinstance(r, dict) and isinstance(r.get("start_line"), int) and isinstance(r.get("end_line"), int)
    ]


def _happened(event: EventRow) -> Happened:
    return Happened(event.id, event.at, event.principal, event.tool, event.outcome)


def chain(tx: Tx, principal: Principal, decision_id: int) -> list[DecisionRecord]:
    """Every decision of `decision_id`'s supersede chain the caller may see, oldest first."""
    viewer = access.viewer(tx, principal)
    walk = decision_model.chains(tx, viewer, [decision_id])
    ids = sorted(walk.reached)
    rows = tx.query_items(viewer, ItemQuery(kinds=(Kind.DECISION,), ids=ids, limit=len(ids) or 1))
    return sorted(decision_model.records(tx, rows), key=lambda r: (r.created_at, r.id))


@dataclass(frozen=True)
class ProposalView:
    name: str
    status: str
    title: str
    target: str
    project: str
    body: str
    supersedes: list[str]
    seconds_left: float
    conflicting: list[DecisionRecord]  # the decisions it would replace, side by side


def proposal_queue(tx: Tx, call: Call) -> list[ProposalView]:
    """Every proposal file, open ones first; admin only (as accepting them is)."""
    if not access.is_admin(tx, call.principal):
        raise forbidden("the proposals queue is for admins")
    viewer = access.viewer(tx, call.principal)
    out = []
    for p in proposals.listing(proposals.directory(call), proposals.cipher_of(call)):
        old = p.meta.get("supersedes") or []
        names = [str(x) for x in (old if isinstance(old, list) else [old])]
        ids = [i for i in (DEC.parse(n) for n in names) if i is not None]
        rows = tx.query_items(viewer, ItemQuery(kinds=(Kind.DECISION,), ids=ids, limit=len(ids) or 1))
        out.append(
            ProposalView(
                name=p.name, status=p.status, title=str(p.meta.get("title", "")),
                target=str(p.meta.get("target", "")), project=str(p.meta.get("project", "")),
                body=p.body, supersedes=names, seconds_left=proposals.time_left(call, p),
                conflicting=decision_model.records(tx, rows),
            )
        )  # fmt: skip
    out.sort(key=lambda v: (v.status != "open", v.name))
    return out


@dataclass(frozen=True)
class TopicPage:
    project: ProjectRow
    topic: dm.TopicNode
    truncated: bool
    logs: list[dm.Log]
    decisions: list[dm.Decision]


def projects(tx: Tx, principal: Principal) -> list[ProjectRow]:
    return tx.list_projects(principal.id, 200)


def topics(tx: Tx, principal: Principal, project_id: int) -> tuple[ProjectRow, list[dm.Topic]]:
    project = access.project(tx, principal, project_id, Need.READ).project
    listed = discussion.get_topics(tx, principal, dm.TopicListInput(project_id=project_id))
    return project, listed.topics


def topic(tx: Tx, principal: Principal, project_id: int, topic_id: int) -> TopicPage:
    project = access.project(tx, principal, project_id, Need.READ).project
    tree = discussion.get_topic_tree(
        tx, principal, dm.TopicTreeInput(project_id=project_id, topic_id=topic_id)
    )
    logs = discussion.get_logs(tx, principal, dm.PageInput(topic_id=topic_id))
    decided = discussion.get_decisions(tx, principal, dm.PageInput(topic_id=topic_id))
    return TopicPage(project, tree.tree, tree.truncated, logs.logs, decided.decisions)
