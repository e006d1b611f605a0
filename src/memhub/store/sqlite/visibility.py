"""The single visibility filter: every read of items in this backend goes through `visible`."""

from __future__ import annotations

from typing import Any

from memhub.core.models import Viewer


def visible(viewer: Viewer, alias: str = "i") -> tuple[str, list[Any]]:
    """SQL condition (and its parameters) that holds for the items `viewer` may read.

    global: everyone; user and session: the owner; project: members of the project (any
    role); never an expired item; only allowed boundary classes when the viewer names some.
    """
    a = alias
    sql = (
        f"({a}.expires_at IS NULL OR {a}.expires_at > ?)"
        f" AND ({a}.scope = 'global'"
        f" OR ({a}.scope IN ('user', 'session') AND {a}.owner = ?)"
        f" OR ({a}.scope = 'project' AND {a}.project_id IN"
        f" (SELECT project_id FROM project_members WHERE principal = ?)))"
    )
    params: list[Any] = [viewer.now, viewer.principal, viewer.principal]
    if viewer.boundaries is not None:
        classes = sorted(viewer.boundaries)
        if not classes:
            return "0", []
        sql += f" AND {a}.boundary_class IN ({', '.join('?' for _ in classes)})"
        params.extend(classes)
    return sql, params
