"""Seed 002: record, supersede and search decisions (proposals: `proposals.py`).

Decisions are the rows of `services/decision_model.py`, shared with the discussion toolset.
A new decision goes into the caller's current project; a superseding one into the project of
the decisions it replaces. Writes made through MCP are an agent's (`via: mcp`, shown with
`[via MCP]`); the CLI's are a person's. An agent may not supersede a person's decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from memhub.core.clock import parse_iso
from memhub.core.errors import ErrorKind, MemhubError, conflict, invalid
from memhub.core.ids import DEC
from memhub.core.models import Kind, Principal
from memhub.search.explain import Explanation
from memhub.search.pipeline import Candidates
from memhub.services import access, decision_model
from memhub.services.access import Need
from memhub.services.decision_model import DecisionRecord, NewDecision
from memhub.services.decisions import errors, ranking
from memhub.services.decisions import models as m
from memhub.services.decisions.config import config
from memhub.services.retrieval import retrieve
from memhub.services.runtime import Call
from memhub.store.base import ItemQuery, ItemRow, Tx

CANDIDATES = 60  # hybrid hits taken before the graph extends and ranks them
ALPHA = 0.5  # vector weight of the fusion (the shared engine's default balance)
CHAIN_DEPTH = 10  # supersede hops walked from each candidate
CHAIN_NODES = 400  # decisions a search may reach through chains
PENDING_NOTE = "decisions recorded just now are still being embedded; search again in a moment"


# -- shared helpers ---------------------------------------------------------------------------


def view(tx: Tx, record: DecisionRecord) -> m.DecisionView:
    project = tx.get_project(record.project_id) if record.project_id is not None else None
    return m.DecisionView(
        id=record.public_id,
        title=record.title,
        target=record.target,
        status=record.status,
        supersedes=[DEC(i) for i in record.supersedes],
        consequences=list(record.consequences),
        via=record.via,
        project=project.name if project is not None else "",
        created_at=record.created_at,
    )


def preview(record: DecisionRecord) -> str:
    """Title and rationale, cut to PREVIEW_CHARS, with `[via MCP]` for an agent's decision."""
    text = " ".join(f"{record.title} — {record.rationale}".split())
    if len(text) > m.PREVIEW_CHARS:
        text = text[: m.PREVIEW_CHARS - 1].rstrip() + "…"
    return decision_model.marked(text, record.via)


def cooldown(tx: Tx, call: Call) -> None:
    """Seed 002's write cooldown: a principal waits `decision_cooldown_s` between two decisions."""
    seconds = config(call).cooldown_s
    if seconds <= 0:
        return
    actor = call.principal
    last = tx.query_items(
        access.viewer(tx, actor), ItemQuery(kinds=(Kind.DECISION,), owner=actor.id, order="id_desc", limit=1)
    )
    if not last:
        return
    elapsed = (call.runtime.clock.now() - parse_iso(last[0].created_at)).total_seconds()
    if elapsed < seconds:
        wait = max(1, math.ceil(seconds - elapsed))
        raise MemhubError(
            ErrorKind.RATE_LIMITED,
            f"decisions may be written once every {seconds:g} s per principal; retry after {wait} s",
            retry_after_s=wait,
        )


def visible_decisions(tx: Tx, actor: Principal, ids: Sequence[str], what: str) -> list[DecisionRecord]:
    """The named decisions, each existing and visible to `actor`, in the given order (no repeats)."""
    viewer = access.viewer(tx, actor)
    rows: list[ItemRow] = []
    seen: set[int] = set()
    for text in ids:
        item_id = DEC.parse(text)
        row = tx.get_item(viewer, item_id, kinds=(Kind.DECISION,)) if item_id is not None else None
        if row is None:
            raise invalid(f"{what}: {text} does not exist or is not visible to you")
        if row.id not in seen:
            seen.add(row.id)
            rows.append(row)
    return decision_model.records(tx, rows)


def check_replaceable(actor: Principal, old: Sequence[DecisionRecord], *, isolation: bool) -> None:
    """A decision is replaced once: superseding a superseded one is a conflict (supersede its
    successor). With `isolation`, an agent may not replace a person's decision."""
    for record in old:
        if record.status == "superseded":
            heads = ", ".join(DEC(i) for i in record.superseded_by)
            raise conflict(f"{record.public_id} is already superseded by {heads}; supersede that instead")
    if isolation and actor.via == "mcp":
        human = [r.public_id for r in old if r.human]
        if human:
            raise errors.IsolationViolation(
                f"{', '.join(human)} was recorded by a person; an agent may not supersede it "
                "(write a proposal for a person to accept)"
            )


def write(tx: Tx, call: Call, new: NewDecision) -> DecisionRecord:
    row = decision_model.create(tx, call.principal, new)
    record = decision_model.records(tx, [row])[0]  # the audit event names what it wrote and replaced
    call.detail.update(decision_id=record.public_id, supersedes=[DEC(i) for i in new.supersedes])
    return record


def new_decision(
    args: m.RecordInput | m.SupersedeInput, project_id: int, supersedes: Sequence[int] = ()
) -> NewDecision:
    """The decision a record or supersede call (or an accepted proposal) asks for."""
    return NewDecision(
        project_id=project_id,
        title=args.title,
        rationale=args.rationale,
        target=args.target,
        origin="decisions",
        consequences=args.consequences,
        supersedes=supersedes,
    )


def _response(tx: Tx, record: DecisionRecord, verb: str) -> m.DecisionResponse:
    decision = view(tx, record)
    replaced = f", superseding {', '.join(decision.supersedes)}" if decision.supersedes else ""
    message = decision_model.marked(
        f"{verb} {decision.id} in project {decision.project!r}{replaced}", record.via
    )
    return m.DecisionResponse(status="success", message=message, decision=decision)


# -- tools ------------------------------------------------------------------------------------


async def record(call: Call, args: m.RecordInput, *, draft: bool = False) -> m.DecisionResponse:
    actor = call.principal

    def work(tx: Tx) -> m.DecisionResponse:
        tx.ensure_principal(actor.id)
        cooldown(tx, call)
        project = access.current_project(tx, actor)
        access.project(tx, actor, project.id, Need.WRITE, label=f"project {project.name!r}")
        record = write(tx, call, replace(new_decision(args, project.id), draft=draft))
        return _response(tx, record, "recorded")

    return await call.transact(work)


async def supersede(call: Call, args: m.SupersedeInput) -> m.DecisionResponse:
    actor = call.principal

    def work(tx: Tx) -> m.DecisionResponse:
        tx.ensure_principal(actor.id)
        cooldown(tx, call)
        old = visible_decisions(tx, actor, args.old_decision_ids, "old_decision_ids")
        projects = {r.project_id for r in old}
        if len(projects) != 1 or None in projects:
            raise invalid("old_decision_ids: the decisions replaced together must belong to one project")
        project_id = old[0].project_id
        assert project_id is not None
        access.project(tx, actor, project_id, Need.WRITE)
        check_replaceable(actor, old, isolation=True)
        record = write(tx, call, new_decision(args, project_id, supersedes=[r.id for r in old]))
        return _response(tx, record, "recorded")

    return await call.transact(work)


async def search(call: Call, args: m.SearchInput, explain: Explanation | None = None) -> m.SearchResponse:
    """Graph-first hybrid search: hybrid candidates, extended along supersede chains, ranked
    by status, authority and dedup (`ranking.py`)."""

    def work(tx: Tx, found: Candidates) -> list[m.SearchHit]:
        own = {hit.item_id: hit.combined for hit in found.hits}  # min-max fused (the engine's)
        if not own:
            return []
        viewer = found.viewer
        walk = decision_model.chains(tx, viewer, list(own), depth=CHAIN_DEPTH, max_nodes=CHAIN_NODES)
        edges = [(link.src, link.dst) for link in walk.edges.values()]
        relevance = ranking.propagate(own, edges)
        ids = list(relevance)
        rows = tx.query_items(viewer, ItemQuery(kinds=(Kind.DECISION,), ids=ids, limit=len(ids)))
        records = {r.id: r for r in decision_model.records(tx, rows)}
        candidates = [
            ranking.Candidate(
                r.id, relevance[r.id], r.status, r.human, decision_model.target_key(r.target), r.project_id
            )
            for r in records.values()
        ]
        ranked = ranking.rank(candidates, args.mode, args.limit)
        if explain is not None:
            _explain(explain, candidates, own, ranked, args.mode)
        chains = ranking.components(records, edges) if args.mode == "audit" else {}
        return [
            m.SearchHit(
                id=DEC(item.candidate.id),
                score=round(item.score, 6),
                status=item.candidate.status,
                preview=preview(records[item.candidate.id]),
                kind=Kind.DECISION,
                target=records[item.candidate.id].target,
                chain=[DEC(i) for i in chains[item.candidate.id]] if chains else None,
            )
            for item in ranked
        ]

    results, note = await retrieve(
        call, args.query, lambda tx: access.viewer(tx, call.principal), work, pending=PENDING_NOTE,
        kinds=(Kind.DECISION,), k_txt=CANDIDATES, k_vec=CANDIDATES, k_final=CANDIDATES, alpha=ALPHA,
        explain=explain,
    )  # fmt: skip
    return m.SearchResponse(
        status="success",
        message=f"{len(results)} decision(s), mode {args.mode}",
        results=results,
        note=note,
    )


def _explain(
    explain: Explanation,
    candidates: list[ranking.Candidate],
    own: dict[int, float],
    ranked: list[ranking.Ranked],
    mode: str,
) -> None:
    """The graph-first factors of every candidate (ranking.py), and what the mode removed."""
    for c in candidates:
        boost = ranking.ACTIVE_BOOST if c.status == "active" else 0.0
        explain.factors[c.id] = {
            "own_relevance": own.get(c.id, 0.0), "relevance": c.relevance,
            "lent_by_chain": "yes" if c.id not in own else "no", "status": c.status,
            "status_boost": boost, "status_penalty": ranking.PENALTY.get(c.status, 1.0) if not boost else 1.0,
            "authority": ranking.AUTHORITY if c.human else 0.0, "target": c.target,
        }  # fmt: skip
        explain.final[c.id] = ranking.graph_score(c.relevance, c.status, c.human)
    explain.stage = "decisions"
    kept = {r.candidate.id for r in ranked}
    explain.count(
        f"not kept by mode {mode} (inactive, a duplicate target, or past the limit)",
        len(candidates) - len(kept),
    )
    explain.params.update(alpha=ALPHA, chain_decay=ranking.CHAIN_DECAY, mode=mode)


# -- for people (the CLI) ---------------------------------------------------------------------


async def deprecate(call: Call, decision_id: str, reason: str) -> DecisionRecord:
    """Retire a decision without a successor (`deprecated` in searches)."""
    actor = call.principal
    if len(reason.strip()) < 10:
        raise invalid("reason: must be at least 10 characters")

    def work(tx: Tx) -> DecisionRecord:
        (record,) = visible_decisions(tx, actor, [decision_id], "decision")
        assert record.project_id is not None
        access.project(tx, actor, record.project_id, Need.WRITE)
        if record.status in ("superseded", "deprecated"):
            raise conflict(f"{record.public_id} is already {record.status}")
        if actor.via == "mcp" and record.human:
            raise errors.IsolationViolation(f"{record.public_id} was recorded by a person")
        decision_model.deprecate(tx, actor, record, reason.strip())
        call.detail.update(decision_id=record.public_id)
        row = tx.get_item(access.viewer(tx, actor), record.id, kinds=(Kind.DECISION,))
        assert row is not None
        return decision_model.records(tx, [row])[0]

    return await call.transact(work)


def listing(
    tx: Tx, actor: Principal, *, status: str | None, target: str | None, limit: int
) -> list[DecisionRecord]:
    """The current project's decisions, newest first, optionally of one status or target."""
    project = tx.get_project_by_name(actor.default_project or "")
    if project is None:
        return []
    access.project(tx, actor, project.id, Need.READ, label=f"project {project.name!r}")
    rows = tx.query_items(
        access.viewer(tx, actor),
        ItemQuery(kinds=(Kind.DECISION,), project_id=project.id, order="id_desc", limit=10_000),
    )
    key = decision_model.target_key(target) if target else None
    found = [
        r
        for r in decision_model.records(tx, rows)
        if status in (None, r.status) and key in (None, decision_model.target_key(r.target))
    ]
    return found[:limit]


def details(tx: Tx, actor: Principal, decision_id: str) -> dict[str, object]:
    """One decision in full: its view, rationale, author, successors and supersede chain."""
    (record,) = visible_decisions(tx, actor, [decision_id], "decision")
    viewer = access.viewer(tx, actor)
    walk = decision_model.chains(tx, viewer, [record.id])
    edges = [(link.src, link.dst) for link in walk.edges.values()]
    chain = ranking.components(walk.reached, edges)[record.id]
    return {
        **view(tx, record).model_dump(),
        "rationale": record.rationale,
        "author": record.author,
        "origin": record.origin,
        "superseded_by": [DEC(i) for i in record.superseded_by],
        "chain": [DEC(i) for i in chain],
        "shown_as": decision_model.marked(record.title, record.via),
    }
