"""The `memory` tool: store, search, get, get_related, update, delete.

Associations are made when a memory is stored (or its content changes):
  semantic - the new memory's nearest visible memories whose calibrated similarity is at
             least SEMANTIC_MIN (strength = that similarity), at most SEMANTIC_K of them;
  temporal - memories the same author stored in the same session within TEMPORAL_WINDOW
             (strength falls from 1.0 to 0.3 across the window);
  manual   - `related_memory_ids` given by the caller (strength 1.0).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import numpy as np

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import MemhubError, invalid
from memhub.core.hashing import content_hash
from memhub.core.models import Viewer
from memhub.services.assoc import access, ranking
from memhub.services.assoc import models as m
from memhub.services.assoc.access import MEMORY
from memhub.services.assoc.ids import mem_id, parse_mem
from memhub.services.runtime import Call
from memhub.store.base import ItemQuery, ItemRow, NewItem, Tx

log = logging.getLogger(__name__)

SEMANTIC_MIN = 0.75
SEMANTIC_K = 5
TEMPORAL_WINDOW = timedelta(minutes=30)
ASSOCIATION = "association"
SUBTYPES = ("semantic", "temporal", "manual")


async def passage_vector(call: Call, text: str) -> np.ndarray | None:
    """The text's vector, or None when no embedder is configured or it cannot run."""
    embedding = call.runtime.embedding
    if embedding is None:
        return None
    try:
        return np.asarray((await embedding.embed_passages([text]))[0], dtype=np.float32)
    except MemhubError as exc:
        log.warning("memory stored without a vector: %s", exc.message)
        return None


async def _semantic_neighbours(
    call: Call, vec: np.ndarray | None, exclude: int | None
) -> list[tuple[int, float]]:
    engine = call.runtime.search
    if vec is None or engine is None or call.runtime.embedding is None:
        return []
    viewer = Viewer(principal=call.principal.id, now=isoformat(call.runtime.clock.now()))
    hits = await engine.nearest(viewer, vec, k=SEMANTIC_K + 1, kinds=(MEMORY,))
    embedder = call.runtime.embedding.id
    found = [(item, ranking.calibrated(embedder, cos)) for item, cos in hits if item != exclude]
    return [(item, sim) for item, sim in found if sim >= SEMANTIC_MIN][:SEMANTIC_K]


def _link(tx: Tx, src: int, dst: int, subtype: str, strength: float) -> m.Association:
    tx.upsert_link(src, dst, ASSOCIATION, subtype, round(strength, 4))
    return _association(src, dst, subtype, round(strength, 4))


def _associate(
    tx: Tx, call: Call, row: ItemRow, semantic: list[tuple[int, float]], manual: list[str]
) -> list[m.Association]:
    made = [_link(tx, row.id, other, "semantic", sim) for other, sim in semantic]
    if row.session_id is not None:
        since = isoformat(parse_iso(tx.now) - TEMPORAL_WINDOW)
        recent = tx.query_items(
            access.viewer(tx, call.principal),
            ItemQuery(kinds=(MEMORY,), owner=row.owner, session_id=row.session_id, created_from=since,
                      order="id_desc", limit=SEMANTIC_K + 1),
        )  # fmt: skip
        for other in recent:
            if other.id != row.id:
                elapsed = (parse_iso(tx.now) - parse_iso(other.created_at)) / TEMPORAL_WINDOW
                made.append(_link(tx, row.id, other.id, "temporal", max(0.3, 1.0 - elapsed)))
    for related in manual:
        other = access.get_memory(tx, call.principal, related)
        if other.id == row.id:
            raise invalid("a memory cannot be associated with itself")
        made.append(_link(tx, row.id, other.id, "manual", 1.0))
    return made


def _put_vector(call: Call, tx: Tx, item_id: int, vec: np.ndarray | None) -> None:
    if vec is not None and call.runtime.embedding is not None:
        data = np.asarray(vec, dtype="<f4")
        tx.put_vector(item_id, call.runtime.embedding.id, data.tobytes(), int(data.shape[0]))


async def store(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    if args.content is None or not args.content.strip():
        raise invalid("content is required to store a memory")
    if args.domain is None:
        raise invalid("domain is required to store a memory (global, user, project or session)")
    content = args.content
    vec = await passage_vector(call, content)
    semantic = await _semantic_neighbours(call, vec, exclude=None)

    def work(tx: Tx) -> m.MemoryOutput:
        where = access.target(tx, call.principal, args.domain, args.project_id, args.session_id)  # type: ignore[arg-type]
        tx.ensure_principal(call.principal.id)
        current = access.current_session(tx, call.principal)
        row = tx.insert_item(
            NewItem(
                kind=MEMORY,
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
        _put_vector(call, tx, row.id, vec)
        made = _associate(tx, call, row, semantic, args.related_memory_ids or [])
        call.detail["memory_id"] = mem_id(row.id)
        return m.MemoryOutput(action="store", memory=access.to_memory(row), associations=made)

    return await call.transact(work)


async def get(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    def work(tx: Tx) -> m.MemoryOutput:
        row = access.get_memory(tx, call.principal, args.memory_id)
        tx.touch_access([row.id])
        fresh = tx.get_item(access.viewer(tx, call.principal), row.id)
        assert fresh is not None
        links = tx.links_of([row.id], [ASSOCIATION])
        return m.MemoryOutput(
            action="get",
            memory=access.to_memory(fresh),
            associations=[_association(x.src, x.dst, str(x.subtype), x.strength) for x in links],
        )

    return await call.transact(work)


def _association(src: int, dst: int, subtype: str, strength: float) -> m.Association:
    return m.Association.model_validate(
        {"from_memory_id": mem_id(src), "to_memory_id": mem_id(dst), "type": subtype, "strength": strength}
    )


async def update(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    if args.memory_id is None:
        raise invalid("memory_id is required to update a memory")
    if args.content is not None and not args.content.strip():
        raise invalid("content must not be empty")
    if args.domain is not None:
        raise invalid("update does not move memories: use memory_manage(action='change_domain')")
    vec = await passage_vector(call, args.content) if args.content is not None else None
    semantic = await _semantic_neighbours(call, vec, exclude=parse_mem(args.memory_id))

    def work(tx: Tx) -> m.MemoryOutput:
        row = access.modifiable_memory(tx, call.principal, str(args.memory_id))
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
        updated = tx.update_item(row.id, changes) if changes else row
        _put_vector(call, tx, row.id, vec)
        made = (
            _associate(tx, call, updated, semantic, args.related_memory_ids or [])
            if vec is not None or args.related_memory_ids
            else []
        )
        return m.MemoryOutput(action="update", memory=access.to_memory(updated), associations=made)

    return await call.transact(work)


async def delete(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    if args.memory_id is None:
        raise invalid("memory_id is required to delete a memory")

    def work(tx: Tx) -> m.MemoryOutput:
        row = access.modifiable_memory(tx, call.principal, str(args.memory_id))
        tx.delete_items([row.id])
        return m.MemoryOutput(action="delete", deleted=[mem_id(row.id)])

    return await call.transact(work)


async def get_related(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    """Breadth-first over associations (both directions), strongest paths first, to `depth`."""

    def work(tx: Tx) -> m.MemoryOutput:
        start = access.get_memory(tx, call.principal, args.memory_id)
        viewer = access.viewer(tx, call.principal)
        best: dict[int, tuple[int, float, str]] = {start.id: (0, 1.0, "")}
        frontier = [start.id]
        for depth in range(1, args.depth + 1):
            reached: dict[int, tuple[int, float, str]] = {}
            for link in tx.links_of(frontier, [ASSOCIATION]):
                for here, there in ((link.src, link.dst), (link.dst, link.src)):
                    if here in frontier and there not in best:
                        strength = best[here][1] * link.strength
                        if there not in reached or reached[there][1] < strength:
                            reached[there] = (depth, strength, str(link.subtype))
            visible = tx.visible_ids(viewer, list(reached), (MEMORY,), None)
            frontier = [item for item in reached if item in visible]
            best.update({item: reached[item] for item in frontier})
            if not frontier:
                break
        ranked = sorted(
            (item for item in best if item != start.id), key=lambda i: (best[i][0], -best[i][1], i)
        )
        ranked = ranked[: args.limit]
        rows = {r.id: r for r in tx.query_items(viewer, ItemQuery(ids=ranked, limit=len(ranked) or 1))}
        related = [
            m.RelatedMemory(
                memory=access.to_memory(rows[i]),
                depth=best[i][0],
                strength=round(best[i][1], 4),
                via=best[i][2],
            )
            for i in ranked
            if i in rows
        ]
        return m.MemoryOutput(action="get_related", memory=access.to_memory(start), related=related)

    return await call.transact(work)
