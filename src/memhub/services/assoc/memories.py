"""The `memory` tool: store, search, get, get_related, update, delete.

Associations are made when a memory is stored (or its content changes):
  semantic - the memory's nearest older memories its author can see whose calibrated
             similarity (ranking.association: e5's and USE's own calibrated scores, mixed) is
             at least SEMANTIC_MIN (strength = that similarity), at most
             SEMANTIC_K of them; made by `link_semantic` once the vector backfill has
             embedded the memory (~0.1 s later), so a store never waits for the model;
  temporal - the memory the same author stored just before in the same session, if within
             TEMPORAL_WINDOW (strength falls from 1.0 to 0.3 across the window): a chain in
             storing order, so a session of unrelated memories is not a complete graph;
  manual   - `related_memory_ids` given by the caller (strength 1.0).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import numpy as np

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import invalid
from memhub.core.hashing import content_hash
from memhub.core.ids import MEM
from memhub.core.models import Kind
from memhub.search import calibration
from memhub.services import access, graph
from memhub.services.assoc import domains, ranking
from memhub.services.assoc import models as m
from memhub.services.runtime import Call, Runtime
from memhub.store.base import ItemQuery, ItemRow, NewItem, Tx

log = logging.getLogger(__name__)

# the lowest strength with precision >= 0.8 on the calibration half of bench/data/assoc_pairs.json
# (precision 0.814, recall 0.686; held out: 0.811 / 0.768; docs/benchmarks.md)
SEMANTIC_MIN = 0.88
SEMANTIC_K = 5
CANDIDATES = 4 * SEMANTIC_K + 1  # nearest by the index's cosine, re-scored model by model
TEMPORAL_WINDOW = timedelta(minutes=30)
TEMPORAL_K = 1  # the previous memory only (issue 23: five made any session a near-complete graph)
ASSOCIATION = "association"
PENDING_NOTE = "associations of memories stored just now are still being made; ask again in a moment"
SUBTYPES = ("semantic", "temporal", "manual")


async def link_semantic(runtime: Runtime, embedded: Sequence[tuple[int, np.ndarray]]) -> int:
    """Semantic associations of memories that just got their vectors; returns how many were made.

    The vector backfill calls this after each batch it stores, so `memory(store)` never waits
    for the model. Each memory is linked to its nearest *older* memories its author can see
    whose calibrated similarity reaches SEMANTIC_MIN (one direction per pair, as at store
    time; a re-embedded memory refreshes its links). One write transaction per batch.
    """
    engine, embedding = runtime.search, runtime.embedding
    if engine is None or embedding is None or not embedded:
        return 0

    def owners() -> dict[int, str]:
        with runtime.store.transaction(write=False) as tx:
            return tx.item_owners([item for item, _ in embedded], (Kind.MEMORY,))

    authors = await runtime.in_thread(owners)
    now = isoformat(runtime.clock.now())
    linked = [(item, vec) for item, vec in embedded if item in authors]  # not a memory, or deleted
    # candidates by the index's cosine, then scored model by model (ranking.association)
    asks = [(access.eyes_of(authors[item], now), vec) for item, vec in linked]
    hits = await engine.nearest_many(asks, k=CANDIDATES, kinds=(Kind.MEMORY,))
    nearest = [
        (item, vec, [other for other, _ in found if other < item])
        for (item, vec), found in zip(linked, hits, strict=True)
    ]
    others = sorted({other for _, _, near in nearest for other in near})
    ends = sorted({item for item, _ in linked} | set(others))

    def read() -> tuple[dict[int, str], dict[int, bytes]]:  # texts: their languages choose the baselines
        with runtime.store.transaction(write=False) as tx:
            return tx.norm_texts(ends), tx.get_vectors(others, embedding.id)

    text, vectors = await runtime.in_thread(read) if ends else ({}, {})
    layout = calibration.parts(embedding.embedder)
    profiles = {i: calibration.profile(body) for i, body in text.items()}  # once per memory, not per pair
    stored, matrix = calibration.stacked(others, vectors, embedding.dim)
    row = {other: i for i, other in enumerate(stored)}
    found: list[tuple[int, int, float]] = []
    for item, vec, near in nearest:  # each memory's candidates scored in one product per model
        scored = [other for other in near if other in row]
        rows = matrix[[row[other] for other in scored]]
        theirs = [profiles.get(other) for other in scored]
        scores = ranking.associations(layout, vec, rows, profiles.get(item), theirs)
        sims = sorted(zip(scored, scores, strict=True), key=lambda pair: (-pair[1], pair[0]))
        found.extend((item, other, sim) for other, sim in sims[:SEMANTIC_K] if sim >= SEMANTIC_MIN)
    if not found:
        return 0

    def write() -> int:
        with runtime.store.transaction(write=True) as tx:
            alive = tx.item_owners(sorted({i for pair in found for i in pair[:2]}), (Kind.MEMORY,))
            made = [(src, dst, sim) for src, dst, sim in found if src in alive and dst in alive]
            for src, dst, sim in made:
                tx.upsert_link(src, dst, ASSOCIATION, "semantic", round(sim, 4))
            return len(made)

    return await runtime.in_thread(write)


def _link(tx: Tx, src: int, dst: int, subtype: str, strength: float) -> m.Association:
    tx.upsert_link(src, dst, ASSOCIATION, subtype, round(strength, 4))
    return _association(src, dst, subtype, round(strength, 4))


def _associate(tx: Tx, call: Call, row: ItemRow, manual: list[str]) -> list[m.Association]:
    """Temporal and manual associations, made with the memory; semantic ones follow its vector."""
    made: list[m.Association] = []
    if row.session_id is not None:
        since = isoformat(parse_iso(tx.now) - TEMPORAL_WINDOW)
        recent = tx.query_items(
            access.viewer(tx, call.principal),
            ItemQuery(kinds=(Kind.MEMORY,), owner=row.owner, session_id=row.session_id, created_from=since,
                      order="id_desc", limit=TEMPORAL_K + 1),
        )  # fmt: skip
        for other in [r for r in recent if r.id != row.id][:TEMPORAL_K]:
            elapsed = (parse_iso(tx.now) - parse_iso(other.created_at)) / TEMPORAL_WINDOW
            made.append(_link(tx, row.id, other.id, "temporal", max(0.3, 1.0 - elapsed)))
    for related in manual:
        other = domains.get_memory(tx, call.principal, related)
        if other.id == row.id:
            raise invalid("a memory cannot be associated with itself")
        made.append(_link(tx, row.id, other.id, "manual", 1.0))
    return made


async def store(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    if args.content is None or not args.content.strip():
        raise invalid("content is required to store a memory")
    if args.domain is None:
        raise invalid("domain is required to store a memory (global, user, project or session)")
    content = args.content

    def work(tx: Tx) -> m.MemoryOutput:
        where = domains.target(tx, call.principal, args.domain, args.project_id, args.session_id)  # type: ignore[arg-type]
        tx.ensure_principal(call.principal.id)
        current = access.current_session(tx, call.principal)
        row = tx.insert_item(
            NewItem(
                kind=Kind.MEMORY,
                owner=call.principal.id,
                scope=where.scope,
                project_id=where.project_id,
                session_id=where.session_id or (current.id if current else None),
                body=content,
                tags=list(dict.fromkeys(args.tags or [])),
                category=args.category,
                importance=0.5 if args.importance is None else args.importance,
                attrs={"metadata": args.metadata or {}, "via": call.principal.via},
                content_hash=content_hash(content),
            )
        )
        made = _associate(tx, call, row, args.related_memory_ids or [])
        call.detail["memory_id"] = MEM(row.id)
        return m.MemoryOutput(action="store", memory=domains.to_memory(row), associations=made)

    return await call.transact(work)


async def get(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    """A read: the access is counted as a deferred write (shown at once in the result)."""
    deferred = call.runtime.deferred

    def work(tx: Tx) -> m.MemoryOutput:
        row = domains.get_memory(tx, call.principal, args.memory_id)
        deferred.touch([row.id])
        seen = replace(row, access_count=row.access_count + deferred.pending_touches(row.id))
        links = tx.links_of([row.id], [ASSOCIATION])
        ends = {x.dst if x.src == row.id else x.src for x in links}
        readable = tx.visible_ids(access.viewer(tx, call.principal), sorted(ends), (Kind.MEMORY,), None)
        links = [x for x in links if (x.dst if x.src == row.id else x.src) in readable]
        return m.MemoryOutput(
            action="get",
            memory=domains.to_memory(seen),
            associations=[_association(x.src, x.dst, str(x.subtype), x.strength) for x in links],
        )

    return await call.read(work)


def _association(src: int, dst: int, subtype: str, strength: float) -> m.Association:
    return m.Association.model_validate(
        {"from_memory_id": MEM(src), "to_memory_id": MEM(dst), "type": subtype, "strength": strength}
    )


async def update(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    if args.memory_id is None:
        raise invalid("memory_id is required to update a memory")
    if args.content is not None and not args.content.strip():
        raise invalid("content must not be empty")
    if args.domain is not None:
        raise invalid("update does not move memories: use memory_manage(action='change_domain')")

    def work(tx: Tx) -> m.MemoryOutput:
        row = domains.modifiable_memory(tx, call.principal, str(args.memory_id))
        changes: dict[str, Any] = {}
        if args.content is not None:
            changes.update(body=args.content, content_hash=content_hash(args.content))
        if args.tags is not None:
            changes["tags"] = list(dict.fromkeys(args.tags))
        if args.category is not None:
            changes["category"] = args.category
        if args.importance is not None:
            changes["importance"] = args.importance
        if args.metadata is not None:
            changes["attrs"] = {**row.attrs, "metadata": {**row.attrs.get("metadata", {}), **args.metadata}}
        if not changes and not args.related_memory_ids:
            raise invalid(
                "nothing to update: give content, tags, category, importance, metadata or related_memory_ids"
            )
        updated = tx.update_item(row.id, changes) if changes else row  # new text: vector dropped
        made = _associate(tx, call, updated, args.related_memory_ids or []) if args.related_memory_ids else []
        return m.MemoryOutput(action="update", memory=domains.to_memory(updated), associations=made)

    return await call.transact(work)


async def delete(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    if args.memory_id is None:
        raise invalid("memory_id is required to delete a memory")

    def work(tx: Tx) -> m.MemoryOutput:
        row = domains.modifiable_memory(tx, call.principal, str(args.memory_id))
        tx.delete_items([row.id])
        return m.MemoryOutput(action="delete", deleted=[MEM(row.id)])

    return await call.transact(work)


async def get_related(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    """Breadth-first over associations (both directions), strongest paths first, to `depth`.
    Waits (bounded) for this process's pending semantic links first: read your writes."""
    note = await call.catch_up(PENDING_NOTE, search=False)

    def work(tx: Tx) -> m.MemoryOutput:
        start = domains.get_memory(tx, call.principal, args.memory_id)
        viewer = access.viewer(tx, call.principal)
        walked = graph.walk(tx, viewer, [start.id], [ASSOCIATION], depth=args.depth, kinds=(Kind.MEMORY,))
        ranked = walked.found()[: args.limit]
        rows = {r.id: r for r in tx.query_items(viewer, ItemQuery(ids=ranked, limit=len(ranked) or 1))}
        related = [
            m.RelatedMemory(
                memory=domains.to_memory(rows[i]),
                depth=walked.reached[i].depth,
                strength=round(walked.reached[i].strength, 4),
                via=walked.reached[i].via,
            )
            for i in ranked
            if i in rows
        ]
        return m.MemoryOutput(
            action="get_related",
            memory=domains.to_memory(start),
            related=related,
            note=note,
        )

    return await call.read(work)
