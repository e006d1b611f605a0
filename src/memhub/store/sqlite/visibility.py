"""The single visibility filter: every read of items in this backend goes through `visible`."""

from __future__ import annotations

from typing import Any

from memhub.core.models import Viewer


def visible(viewer: Viewer, alias: str = "i") -> tuple[str, list[Any]]:
    """SQL condition (and its parameters) that holds for the items `viewer` may read.

    global: everyone; user: the owner; session: the owner, and with `sessions="current"` only
    the rows of `viewer.session_id`; project: members of the project (any role); never an
    expired item; only the boundary classes the viewer may see (fail closed: none listed,
    nothing seen).
    """
    a = alias
    if viewer.sessions == "current":
        session_sql = f"{a}.owner = ? AND {a}.session_id IS NOT NULL AND {a}.session_id = ?"
        session_args: list[Any] = [viewer.principal, viewer.session_id]
    else:
        session_sql, session_args = f"{a}.owner = ?", [viewer.principal]
    classes = sorted(viewer.boundaries)
    if not classes:
        return "0", []
    sql = (
        f"({a}.expires_at IS NULL OR {a}.expires_at > ?)"
        f" AND ({a}.scope = 'global'"
        f" OR ({a}.scope = 'user' AND {a}.owner = ?)"
        f" OR ({a}.scope = 'session' AND {session_sql})"
        f" OR ({a}.scope = 'project' AND {a}.project_id IN"
        f" (SELECT project_id FROM project_members WHERE principal = ?)))"
        f" AND {a}.boundary_class IN ({', '.join('?' for _ in classes)})"
    )
    return sql, [viewer.now, viewer.principal, *session_args, viewer.principal, *classes]
