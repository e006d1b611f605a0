"""The single visibility filter: every read of items, in every SQL backend, goes through `visible`."""

from __future__ import annotations

from typing import Any

from memhub.core.models import Viewer
from memhub.store.sql.dialect import SQLITE, Dialect


def visible(viewer: Viewer, alias: str = "i", dialect: Dialect = SQLITE) -> tuple[str, list[Any]]:
    """SQL condition (and its parameters) that holds for the items `viewer` may read.

    global: everyone; user: the owner; session: the owner, and with `sessions="current"` only
    the rows of `viewer.session_id`; project: members of the project (any role); never an
    expired item; only the boundary classes the viewer may see (fail closed: none listed,
    nothing seen).
    """
    a, p = alias, dialect.param
    if viewer.sessions == "current":
        session_sql = f"{a}.owner = {p} AND {a}.session_id IS NOT NULL AND {a}.session_id = {p}"
        session_args: list[Any] = [viewer.principal, viewer.session_id]
    else:
        session_sql, session_args = f"{a}.owner = {p}", [viewer.principal]
    classes = sorted(viewer.boundaries)
    if not classes:
        return dialect.false, []
    sql = (
        f"({a}.expires_at IS NULL OR {a}.expires_at > {p})"
        f" AND ({a}.scope = 'global'"
        f" OR ({a}.scope = 'user' AND {a}.owner = {p})"
        f" OR ({a}.scope = 'session' AND {session_sql})"
        f" OR ({a}.scope = 'project' AND {a}.project_id IN"
        f" (SELECT project_id FROM project_members WHERE principal = {p})))"
        f" AND {a}.boundary_class IN ({dialect.placeholders(classes)})"
    )
    return sql, [viewer.now, viewer.principal, *session_args, viewer.principal, *classes]
