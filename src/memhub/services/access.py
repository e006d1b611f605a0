"""Who may see and do what: a call's viewer, project access by role, the admin role.

Every toolset asks here; none decides access on its own. What a read returns is decided by
the store's one visibility filter from the `Viewer` built here (scope, membership, session,
owner, boundary class, expiry). What a call may do to a project is decided by `project`:

| need     | what it covers                          | project roles          | global admin |
|----------|-----------------------------------------|------------------------|--------------|
| READ     | read the project's records              | owner, editor, viewer  | no           |
| WRITE    | add or change records in it             | owner, editor          | no           |
| INSPECT  | its name, members and counts            | owner, editor, viewer  | yes          |
| EDIT     | rename it, change its description       | owner, editor          | yes          |
| MANAGE   | add/remove members, delete it           | owner                  | yes          |

Admins manage projects but do not read their content unless they are members. A project
the caller may not even inspect is reported as not found, so its existence does not leak.
The admin role is read from the store (the role of record), never from a cached principal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from memhub.core.errors import conflict, forbidden, invalid, not_found
from memhub.core.models import (
    DEFAULT_BOUNDARIES,
    WRITE_ROLES,
    Principal,
    ProjectRole,
    Scope,
    SessionRule,
    Viewer,
)
from memhub.store.base import ItemRow, ProjectRow, SessionRow, Tx


class Need(StrEnum):
    READ = "read"
    WRITE = "write"
    INSPECT = "inspect"
    EDIT = "edit"
    MANAGE = "manage"


ALL_ROLES = frozenset(ProjectRole)
RULES: dict[Need, tuple[frozenset[ProjectRole], bool]] = {
    Need.READ: (ALL_ROLES, False),
    Need.WRITE: (WRITE_ROLES, False),
    Need.INSPECT: (ALL_ROLES, True),
    Need.EDIT: (WRITE_ROLES, True),
    Need.MANAGE: (frozenset({ProjectRole.OWNER}), True),
}
_REFUSALS = {
    Need.WRITE: "{p} is read-only for you (role: {role}): viewers cannot write",
    Need.INSPECT: "{p} is not visible to you",
    Need.EDIT: "viewers cannot update {p}",
    Need.MANAGE: "only the owner of {p} (or an admin) may manage its members or delete it",
}


@dataclass(frozen=True)
class ProjectAccess:
    project: ProjectRow
    role: ProjectRole | None  # None: an admin acting without membership


def is_admin(tx: Tx, actor: Principal) -> bool:
    row = tx.get_principal(actor.id)
    return row is not None and row.role == "admin"


def viewer(
    tx: Tx,
    actor: Principal,
    *,
    sessions: SessionRule = "own",
    session_id: str | None = None,
    boundaries: Iterable[str] | None = None,
) -> Viewer:
    """The eyes of `actor` for reads in `tx`. `sessions="current"` narrows session memories to
    `session_id`, by default the actor's current session. `boundaries`: the boundary classes
    the caller's policy allows (default: public and internal only — fail closed)."""
    if sessions == "current" and session_id is None:
        current = current_session(tx, actor)
        session_id = current.id if current else None
    allowed = DEFAULT_BOUNDARIES if boundaries is None else frozenset(boundaries)
    return Viewer(actor.id, tx.now, session_id=session_id, sessions=sessions, boundaries=allowed)


def eyes_of(principal: str, now: str) -> Viewer:
    """A principal's default view, for work done on its behalf outside a call (background
    linking, counts of a project's records by its owner)."""
    return Viewer(principal, now, boundaries=DEFAULT_BOUNDARIES)


def project(
    tx: Tx, actor: Principal, project_id: int, need: Need, *, label: str | None = None
) -> ProjectAccess:
    """The project if `actor` may do `need` to it (see the table above). `label` is how the
    caller's toolset names the project in messages (`project 7`, `proj_7`)."""
    name = label or f"project {project_id}"
    row = tx.get_project(project_id)
    role = tx.member_role(project_id, actor.id) if row is not None else None
    roles, admin_may = RULES[need]
    admin = admin_may and row is not None and is_admin(tx, actor)
    if row is None or (role is None and not admin):
        raise not_found(f"{name} not found")
    if role in roles or admin:
        return ProjectAccess(row, role)
    raise forbidden(_REFUSALS[need].format(p=name, role=role))


def may_modify(tx: Tx, actor: Principal, row: ItemRow) -> bool:
    """Whether `actor` may change or delete an item it can read: its author, an admin, or (a
    project item) an owner or editor of the project."""
    if row.owner == actor.id or is_admin(tx, actor):
        return True
    if row.scope != Scope.PROJECT or row.project_id is None:
        return False
    return tx.member_role(row.project_id, actor.id) in WRITE_ROLES


def name_is_free(tx: Tx, actor: Principal, name: str, *, keep: int | None = None) -> None:
    """Project names are unique in a store. A taken name is reported as "already exists" only
    to those who can see that project (its members and admins); anyone else gets a neutral
    refusal that does not say whether a project of that name exists."""
    row = tx.get_project_by_name(name)
    if row is None or row.id == keep:
        return
    if tx.member_role(row.id, actor.id) is not None or is_admin(tx, actor):
        raise conflict(f"a project named {name!r} already exists")
    raise conflict(f"the project name {name!r} is not available; choose another name")


def existing_user(tx: Tx, user_id: str) -> str:
    """A principal that exists (created by its first connection, or by an admin with
    `memhub apikey create`): naming someone does not create them."""
    if tx.get_principal(user_id) is None:
        raise not_found(f"user {user_id!r} not found")
    return user_id


def current_session(tx: Tx, actor: Principal) -> SessionRow | None:
    """The actor's current session, if it is still active."""
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


def current_project(tx: Tx, actor: Principal) -> ProjectRow:
    """The actor's current project (`--project` / git root name), created on first use."""
    name = actor.default_project
    if not name:
        raise invalid("no current project: pass one explicitly or start memhub with --project")
    row = tx.get_project_by_name(name)
    if row is None:
        return tx.insert_project(name, None, {}, actor.id)
    if tx.member_role(row.id, actor.id) is None:
        raise not_found(f"project {name!r} not found")
    return row
