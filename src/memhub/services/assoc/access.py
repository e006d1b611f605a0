"""Where a memory may be written and who may change it (seed 003 §3 domains and roles).

Reads never come here: the store's one visibility filter decides what a principal sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from memhub.core.errors import forbidden, invalid, not_found
from memhub.core.models import WRITE_ROLES, Principal, Scope, Viewer
from memhub.services.assoc import models as m
from memhub.services.assoc.ids import mem_id, parse_mem, parse_proj, proj_id
from memhub.store.base import ItemQuery, ItemRow, SessionRow, Tx

MEMORY = "memory"


@dataclass(frozen=True)
class Target:
    scope: Scope
    project_id: int | None
    session_id: str | None


def viewer(tx: Tx, actor: Principal) -> Viewer:
    return Viewer(principal=actor.id, now=tx.now)


def is_admin(tx: Tx, actor: Principal) -> bool:
    row = tx.get_principal(actor.id)
    return row is not None and row.role == "admin"


def current_session(tx: Tx, actor: Principal) -> SessionRow | None:
    row = tx.get_principal(actor.id)
    if row is None or row.current_session_id is None:
        return None
    session = tx.get_session(row.current_session_id)
    return session if session is not None and session.status == "active" else None


def own_session(tx: Tx, actor: Principal, session_id: str | None) -> SessionRow:
    """The named session (or the current one); it must be the actor's and still active."""
    if session_id is None:
        session = current_session(tx, actor)
        if session is None:
            raise invalid(
                "no active session: create one with user(action='create_session') or pass session_id"
            )
        return session
    session = tx.get_session(session_id)
    if session is None or session.principal != actor.id:
        raise not_found(f"session {session_id} not found")
    if session.status != "active":
        raise invalid(f"session {session_id} has ended")
    return session


def writable_project(tx: Tx, actor: Principal, project_id: str | None) -> int:
    if project_id is None:
        raise invalid("project_id is required for the project domain")
    pid = parse_proj(project_id)
    role = tx.member_role(pid, actor.id) if tx.get_project(pid) else None
    if role is None:
        raise not_found(f"project {project_id} not found")
    if role not in WRITE_ROLES:
        raise forbidden(f"you are a viewer of {project_id}: viewers cannot write")
    return pid


def target(
    tx: Tx, actor: Principal, domain: m.Domain, project_id: str | None, session_id: str | None
) -> Target:
    if domain == "project":
        return Target(Scope.PROJECT, writable_project(tx, actor, project_id), None)
    if domain == "session":
        return Target(Scope.SESSION, None, own_session(tx, actor, session_id).id)
    if project_id is not None:
        raise invalid(f"project_id only applies to the project domain, not {domain}")
    return Target(Scope(domain), None, None)


def memories_in(domain: str | None, project_id: str | None, session_id: str | None, limit: int) -> ItemQuery:
    """Memories of one domain / project / session (each optional): the filter of stats, exports, charts."""
    return ItemQuery(
        kinds=(MEMORY,),
        scopes=[domain] if domain is not None else (),
        project_id=parse_proj(project_id) if project_id is not None else None,
        session_id=session_id,
        limit=limit,
    )


def get_memory(tx: Tx, actor: Principal, memory_id: str | None) -> ItemRow:
    if memory_id is None:
        raise invalid("memory_id is required")
    row = tx.get_item(viewer(tx, actor), parse_mem(memory_id), kinds=(MEMORY,))
    if row is None:
        raise not_found(f"memory {memory_id} not found")
    return row


def modifiable_memory(tx: Tx, actor: Principal, memory_id: str) -> ItemRow:
    """A memory the actor may change: its author, an admin, or (project domain) an editor."""
    row = get_memory(tx, actor, memory_id)
    if row.owner == actor.id or is_admin(tx, actor):
        return row
    role = tx.member_role(row.project_id, actor.id) if row.project_id is not None else None
    if row.scope == Scope.PROJECT and role is not None and role in WRITE_ROLES:
        return row
    raise forbidden(f"you may read {memory_id} but not change it")


def to_memory(row: ItemRow, *, score: float | None = None, similarity: float | None = None) -> m.Memory:
    return m.Memory(
        id=mem_id(row.id),
        content=row.body,
        domain=row.scope,  # type: ignore[arg-type]
        tags=list(row.tags),
        category=row.category,
        importance=row.importance,
        access_count=row.access_count,
        metadata=dict(row.attrs.get("metadata", {})),
        user_id=row.owner if row.scope in (Scope.USER, Scope.SESSION) else None,
        project_id=proj_id(row.project_id) if row.project_id is not None else None,
        session_id=row.session_id,
        author_id=row.owner,
        created_at=row.created_at,
        updated_at=row.updated_at,
        expires_at=row.expires_at,
        score=None if score is None else round(score, 4),
        similarity=None if similarity is None else round(similarity, 4),
    )
