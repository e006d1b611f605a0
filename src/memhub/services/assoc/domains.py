"""Seed 003's domains over the one access module: where a memory may be written, which
memories a filter covers, and how a row is shown. Who may do what is decided by
`memhub.services.access`; what a read returns, by the store's one visibility filter."""

from __future__ import annotations

from dataclasses import dataclass

from memhub.core.errors import forbidden, invalid, not_found
from memhub.core.ids import MEM, NOTE, PROJ, parse_session
from memhub.core.models import Kind, Principal, Scope
from memhub.services import access
from memhub.services.access import Need
from memhub.services.assoc import models as m
from memhub.store.base import ItemQuery, ItemRow, Tx


@dataclass(frozen=True)
class Target:
    scope: Scope
    project_id: int | None
    session_id: str | None


def writable_project(tx: Tx, actor: Principal, project_id: str | None) -> int:
    """The project (a `proj_…` id) a memory may be written to by `actor`."""
    if project_id is None:
        raise invalid("project_id is required for the project domain")
    return access.project(tx, actor, PROJ.require(project_id), Need.WRITE, label=project_id).project.id


def target(
    tx: Tx, actor: Principal, domain: m.Domain, project_id: str | None, session_id: str | None
) -> Target:
    if domain == "project":
        return Target(Scope.PROJECT, writable_project(tx, actor, project_id), None)
    if domain == "session":
        return Target(Scope.SESSION, None, access.own_session(tx, actor, session_id).id)
    if project_id is not None:
        raise invalid(f"project_id only applies to the project domain, not {domain}")
    if session_id is not None:
        raise invalid(f"session_id only applies to the session domain, not {domain}")
    return Target(Scope(domain), None, None)


def check_filters(tx: Tx, actor: Principal, project_id: str | None, session_id: str | None) -> None:
    """A project or session named as a filter must exist and be the caller's to read: an
    unknown or malformed id is an error, not an empty result."""
    if project_id is not None:
        access.project(tx, actor, PROJ.require(project_id), Need.READ, label=project_id)
    if session_id is not None:
        session = tx.get_session(parse_session(session_id))
        if session is None or session.principal != actor.id:
            raise not_found(f"session {session_id} not found")


def memories_in(domain: str | None, project_id: str | None, session_id: str | None, limit: int) -> ItemQuery:
    """Memories of one domain / project / session (each optional): the filter of stats, exports, charts."""
    return ItemQuery(
        kinds=(Kind.MEMORY,),
        scopes=[domain] if domain is not None else (),
        project_id=PROJ.require(project_id) if project_id is not None else None,
        session_id=session_id,
        limit=limit,
    )


def get_memory(tx: Tx, actor: Principal, memory_id: str | None) -> ItemRow:
    if memory_id is None:
        raise invalid("memory_id is required")
    row = tx.get_item(access.viewer(tx, actor), MEM.require(memory_id), kinds=(Kind.MEMORY,))
    if row is None:
        raise not_found(f"memory {memory_id} not found")
    return row


def modifiable_memory(tx: Tx, actor: Principal, memory_id: str) -> ItemRow:
    """A memory the actor may change: its author, an admin, or (project domain) an editor."""
    row = get_memory(tx, actor, memory_id)
    if not access.may_modify(tx, actor, row):
        raise forbidden(f"you may read {memory_id} but not change it")
    return row


def to_memory(row: ItemRow, *, score: float | None = None, similarity: float | None = None) -> m.Memory:
    """A memory as seed 003 shows it. A vault note section found by a semantic search is shown
    the same way, with id `note_…`, category `vault` and its file and lines in `metadata`."""
    note = row.kind == Kind.NOTE
    metadata = (
        {"vault_path": row.attrs.get("path"), "lines": row.attrs.get("lines"), "title": row.title}
        if note
        else dict(row.attrs.get("metadata", {}))
    )
    return m.Memory(
        id=NOTE(row.id) if note else MEM(row.id),
        content=row.body,
        domain=row.scope,  # type: ignore[arg-type]
        tags=list(row.tags),
        category="vault" if note else row.category,
        importance=row.importance,
        access_count=row.access_count,
        metadata=metadata,
        user_id=row.owner if row.scope in (Scope.USER, Scope.SESSION) else None,
        project_id=PROJ(row.project_id) if row.project_id is not None else None,
        session_id=row.session_id,
        author_id=row.owner,
        created_at=row.created_at,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
        score=None if score is None else round(score, 4),
        similarity=None if similarity is None else round(similarity, 4),
    )
