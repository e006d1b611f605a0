"""The `project` and `user` tools: projects with members and roles; the user's sessions.

These are the same project rows the discussion toolset shows with integer ids. Roles: the
creator is the owner (editor rights plus membership management), editors write, viewers
only read. Admins may manage any project.
"""

from __future__ import annotations

from typing import Any

from memhub.core.errors import invalid, not_found
from memhub.core.ids import PROJ, new_session_id
from memhub.core.models import Kind, ProjectRole
from memhub.services import access
from memhub.services.access import Need
from memhub.services.assoc import models as m
from memhub.services.runtime import Call
from memhub.store.base import ItemQuery, ProjectRow, SessionRow, Tx

MAX_LIST = 100


def _project(tx: Tx, row: ProjectRow, role: ProjectRole | None, *, detail: bool = False) -> m.Project:
    members = stats = None
    if detail:
        listed = tx.list_members(row.id)
        members = [m.Member(user_id=x.principal, role=str(x.role), joined_at=x.created_at) for x in listed]
        stats = _project_stats(tx, row.id)
    return m.Project(
        id=PROJ(row.id),
        name=row.name,
        description=row.description,
        owner=row.owner,
        role=str(role) if role else None,
        created_at=row.created_at,
        updated_at=row.updated_at,
        members=members,
        stats=stats,
    )


def _project_stats(tx: Tx, project_id: int) -> dict[str, Any]:
    """Counts of the project's records by kind (memory, topic, log, decision) and by domain."""
    owner = tx.get_project(project_id)
    assert owner is not None
    viewer = access.eyes_of(owner.owner, tx.now)  # the owner sees every project record
    everything = ItemQuery(project_id=project_id)
    return {
        "records_by_kind": tx.group_counts(viewer, everything, "kind"),
        "memories_by_domain": tx.group_counts(
            viewer, ItemQuery(kinds=(Kind.MEMORY,), project_id=project_id), "scope"
        ),
    }


def _access(tx: Tx, call: Call, project_id: str | None, need: Need) -> access.ProjectAccess:
    if project_id is None:
        raise invalid("project_id is required")
    return access.project(tx, call.principal, PROJ.require(project_id), need, label=project_id)


async def project(call: Call, args: m.ProjectInput) -> m.ProjectOutput:
    def work(tx: Tx) -> m.ProjectOutput:
        actor = call.principal
        tx.ensure_principal(actor.id)
        if args.action == "create":
            name = (args.name or "").strip()
            if not name:
                raise invalid("name is required to create a project")
            access.name_is_free(tx, actor, name)
            row = tx.insert_project(name, args.description, {}, actor.id)
            return m.ProjectOutput(action="create", project=_project(tx, row, ProjectRole.OWNER, detail=True))
        if args.action == "list":
            roles = {"editor": [ProjectRole.OWNER, ProjectRole.EDITOR], "viewer": [ProjectRole.VIEWER]}
            found = tx.list_memberships(actor.id, roles.get(args.role_filter or "", []), MAX_LIST)
            return m.ProjectOutput(action="list", projects=[_project(tx, row, role) for row, role in found])
        if args.action == "get":
            seen = _access(tx, call, args.project_id, Need.INSPECT)
            return m.ProjectOutput(action="get", project=_project(tx, seen.project, seen.role, detail=True))
        if args.action == "add_member":
            row = _access(tx, call, args.project_id, Need.MANAGE).project
            if not args.user_id or args.role is None:
                raise invalid("user_id and role are required to add a member")
            if tx.member_role(row.id, args.user_id) is ProjectRole.OWNER:
                raise invalid(f"{args.user_id} owns the project; the owner's role cannot change")
            access.existing_user(tx, args.user_id)
            tx.set_member(row.id, args.user_id, ProjectRole(args.role))
            return m.ProjectOutput(
                action="add_member", project=_project(tx, row, tx.member_role(row.id, actor.id), detail=True)
            )
        if args.action == "remove_member":
            if not args.user_id:
                raise invalid("user_id is required to remove a member")
            if args.user_id == actor.id:
                row = _access(tx, call, args.project_id, Need.INSPECT).project  # anyone may leave
            else:
                row = _access(tx, call, args.project_id, Need.MANAGE).project
            if tx.member_role(row.id, args.user_id) is ProjectRole.OWNER:
                raise invalid("the owner cannot be removed; delete the project instead")
            if not tx.remove_member(row.id, args.user_id):
                raise not_found(f"{args.user_id} is not a member of {args.project_id}")
            return m.ProjectOutput(action="remove_member", removed=args.user_id)
        if args.action == "update":
            editing = _access(tx, call, args.project_id, Need.EDIT)
            row, role = editing.project, editing.role
            if args.name is None and args.description is None:
                raise invalid("give name or description to update")
            new_name = args.name.strip() if args.name is not None else None
            if new_name == "":
                raise invalid("name must not be empty")
            if new_name:
                access.name_is_free(tx, actor, new_name, keep=row.id)
            updated = tx.update_project(row.id, new_name, args.description)
            return m.ProjectOutput(action="update", project=_project(tx, updated, role, detail=True))
        row = _access(tx, call, args.project_id, Need.MANAGE).project
        held = tx.project_item_count(row.id)  # all of them, whoever can see them
        if held and not args.force:
            raise invalid(
                f"{args.project_id} still holds {held} records; pass force=true to delete them with it"
            )
        tx.delete_project(row.id)
        return m.ProjectOutput(action="delete", deleted=PROJ(row.id))

    return await call.transact(work)


def _session(row: SessionRow, current: str | None) -> m.Session:
    return m.Session(
        id=row.id, name=row.name, status=row.status, current=row.id == current, created_at=row.created_at,
        ended_at=row.ended_at,
    )  # fmt: skip


def _user_stats(tx: Tx, call: Call) -> dict[str, Any]:
    viewer = access.viewer(tx, call.principal)
    mine = ItemQuery(kinds=(Kind.MEMORY,), owner=call.principal.id)
    return {
        "memories": tx.count_items(viewer, mine),
        "memories_by_domain": tx.group_counts(viewer, mine, "scope"),
        "projects": len(tx.list_memberships(call.principal.id, [], 10_000)),
        "sessions": len(tx.list_sessions(call.principal.id, 10_000)),
    }


async def user(call: Call, args: m.UserInput) -> m.UserOutput:
    def work(tx: Tx) -> m.UserOutput:
        actor = call.principal
        me = tx.ensure_principal(actor.id)
        current = access.current_session(tx, actor)
        current_id = current.id if current else None
        if args.action == "get_current":
            return m.UserOutput(
                action="get_current",
                user_id=actor.id,
                role=me.role,
                current_session=_session(current, current_id) if current else None,
                stats=_user_stats(tx, call) if args.include_stats else None,
            )
        if args.action == "get_projects":
            found = tx.list_memberships(actor.id, [], MAX_LIST)
            projects = [_project(tx, row, role) for row, role in found]
            if args.include_stats:
                viewer = access.viewer(tx, actor)
                for item, (row, _) in zip(projects, found, strict=True):
                    item.stats = {"records": tx.group_counts(viewer, ItemQuery(project_id=row.id), "kind")}
            return m.UserOutput(action="get_projects", user_id=actor.id, projects=projects)
        if args.action == "get_sessions":
            sessions = [_session(s, current_id) for s in tx.list_sessions(actor.id, MAX_LIST)]
            return m.UserOutput(action="get_sessions", user_id=actor.id, sessions=sessions)
        if args.action == "create_session":
            created = tx.create_session(new_session_id(), actor.id, args.session_name, None)
            tx.set_current_session(actor.id, created.id)
            return m.UserOutput(
                action="create_session", user_id=actor.id, session=_session(created, created.id)
            )
        if args.session_id is None:
            raise invalid(f"session_id is required to {args.action.replace('_', ' ')}")
        if args.action == "switch_session":
            target = access.own_session(tx, actor, args.session_id)
            tx.set_current_session(actor.id, target.id)
            return m.UserOutput(
                action="switch_session", user_id=actor.id, session=_session(target, target.id)
            )
        session = tx.get_session(args.session_id)
        if session is None or session.principal != actor.id:
            raise not_found(f"session {args.session_id} not found")
        if session.status == "ended":
            raise invalid(f"session {args.session_id} has already ended")
        ended = tx.end_session(session.id)
        if current_id == session.id:
            tx.set_current_session(actor.id, None)
        return m.UserOutput(action="end_session", user_id=actor.id, session=_session(ended, None))

    return await call.transact(work)
