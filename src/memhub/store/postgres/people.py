"""Principals, projects, memberships and sessions on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from psycopg import Connection
from psycopg.rows import DictRow

from memhub.core.errors import not_found
from memhub.core.models import ProjectRole
from memhub.store.base import MemberRow, PrincipalRow, ProjectRow, SessionRow
from memhub.store.sql import POSTGRESQL

placeholders = POSTGRESQL.placeholders
ADMIN_LOCK = 0x6D656D6875620003  # the first principal is the admin: one creator at a time


def _project(row: DictRow) -> ProjectRow:
    return ProjectRow(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        attrs=json.loads(row["attrs"]),
        owner=row["owner"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _session(row: DictRow) -> SessionRow:
    return SessionRow(
        id=row["id"],
        principal=row["principal"],
        name=row["name"],
        project_id=row["project_id"],
        status=row["status"],
        created_at=row["created_at"],
        ended_at=row["ended_at"],
    )


def _principal(row: DictRow) -> PrincipalRow:
    return PrincipalRow(row["id"], row["kind"], row["role"], row["current_session_id"], row["created_at"])


class PeopleMixin:
    conn: Connection[DictRow]
    now: str

    def ensure_principal(self, principal: str, kind: str = "user") -> PrincipalRow:
        """The principal, created on first sight. The first principal of a store is its admin."""
        found = self.get_principal(principal)
        if found is not None:
            return found
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADMIN_LOCK,))
        self.conn.execute(
            "INSERT INTO principals(id, kind, role, created_at) VALUES (%s, %s,"
            " CASE WHEN EXISTS (SELECT 1 FROM principals) THEN 'member' ELSE 'admin' END, %s)"
            " ON CONFLICT (id) DO NOTHING",
            (principal, kind, self.now),
        )
        found = self.get_principal(principal)
        assert found is not None
        return found

    def get_principal(self, principal: str) -> PrincipalRow | None:
        row = self.conn.execute("SELECT * FROM principals WHERE id = %s", (principal,)).fetchone()
        return _principal(row) if row else None

    def set_api_key(self, principal: str, key_hash: str | None, role: str | None = None) -> None:
        self.conn.execute(
            "UPDATE principals SET api_key_hash = %s, role = coalesce(%s, role) WHERE id = %s",
            (key_hash, role, principal),
        )

    def principal_by_key(self, key_hash: str) -> PrincipalRow | None:
        row = self.conn.execute("SELECT * FROM principals WHERE api_key_hash = %s", (key_hash,)).fetchone()
        return _principal(row) if row else None

    def list_principals(self) -> list[PrincipalRow]:
        rows = self.conn.execute("SELECT * FROM principals ORDER BY created_at, id").fetchall()
        return [_principal(r) for r in rows]

    def has_api_key(self, principal: str) -> bool:
        row = self.conn.execute("SELECT api_key_hash FROM principals WHERE id = %s", (principal,)).fetchone()
        return bool(row and row["api_key_hash"])

    def set_current_session(self, principal: str, session_id: str | None) -> None:
        self.conn.execute(
            "UPDATE principals SET current_session_id = %s WHERE id = %s", (session_id, principal)
        )

    def insert_project(
        self, name: str, description: str | None, attrs: dict[str, Any], owner: str
    ) -> ProjectRow:
        row = self.conn.execute(
            "INSERT INTO projects(name, description, attrs, owner, created_at, updated_at)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING *",
            (name, description, json.dumps(attrs, ensure_ascii=False), owner, self.now, self.now),
        ).fetchone()
        assert row is not None
        self.set_member(row["id"], owner, ProjectRole.OWNER)
        return _project(row)

    def get_project(self, project_id: int) -> ProjectRow | None:
        row = self.conn.execute("SELECT * FROM projects WHERE id = %s", (project_id,)).fetchone()
        return _project(row) if row else None

    def get_project_by_name(self, name: str) -> ProjectRow | None:
        row = self.conn.execute("SELECT * FROM projects WHERE name = %s", (name,)).fetchone()
        return _project(row) if row else None

    def list_projects(self, principal: str, limit: int) -> list[ProjectRow]:
        rows = self.conn.execute(
            "SELECT p.* FROM projects p JOIN project_members m ON m.project_id = p.id"
            " WHERE m.principal = %s ORDER BY p.id DESC LIMIT %s",
            (principal, limit),
        ).fetchall()
        return [_project(r) for r in rows]

    def set_member(self, project_id: int, principal: str, role: ProjectRole) -> None:
        self.conn.execute(
            "INSERT INTO project_members(project_id, principal, role, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (project_id, principal) DO UPDATE SET role = excluded.role",
            (project_id, principal, str(role), self.now),
        )

    def member_role(self, project_id: int, principal: str) -> ProjectRole | None:
        row = self.conn.execute(
            "SELECT role FROM project_members WHERE project_id = %s AND principal = %s",
            (project_id, principal),
        ).fetchone()
        return ProjectRole(row["role"]) if row else None

    def update_project(self, project_id: int, name: str | None, description: str | None) -> ProjectRow:
        row = self.conn.execute(
            "UPDATE projects SET name = coalesce(%s, name), description = coalesce(%s, description),"
            " updated_at = %s WHERE id = %s RETURNING *",
            (name, description, self.now, project_id),
        ).fetchone()
        if row is None:
            raise not_found(f"project {project_id} not found")
        return _project(row)

    def project_item_count(self, project_id: int) -> int:
        sql = "SELECT count(*) AS n FROM items WHERE project_id = %s"
        row = self.conn.execute(sql, (project_id,)).fetchone()
        return int(row["n"]) if row else 0

    def delete_project(self, project_id: int) -> None:
        self.conn.execute("DELETE FROM projects WHERE id = %s", (project_id,))

    def list_members(self, project_id: int) -> list[MemberRow]:
        rows = self.conn.execute(
            "SELECT * FROM project_members WHERE project_id = %s ORDER BY created_at, principal",
            (project_id,),
        ).fetchall()
        return [
            MemberRow(r["project_id"], r["principal"], ProjectRole(r["role"]), r["created_at"]) for r in rows
        ]

    def remove_member(self, project_id: int, principal: str) -> bool:
        cur = self.conn.execute(
            "DELETE FROM project_members WHERE project_id = %s AND principal = %s", (project_id, principal)
        )
        return cur.rowcount > 0

    def list_memberships(
        self, principal: str, roles: Sequence[ProjectRole], limit: int
    ) -> list[tuple[ProjectRow, ProjectRole]]:
        sql = (
            "SELECT p.*, m.role AS member_role FROM projects p JOIN project_members m ON m.project_id = p.id"
            " WHERE m.principal = %s"
        )
        args: list[Any] = [principal]
        if roles:
            sql += f" AND m.role IN ({placeholders(roles)})"
            args.extend(str(r) for r in roles)
        rows = self.conn.execute(sql + " ORDER BY p.id DESC LIMIT %s", [*args, limit]).fetchall()
        return [(_project(r), ProjectRole(r["member_role"])) for r in rows]

    # -- sessions -------------------------------------------------------------------------------

    def create_session(
        self, session_id: str, principal: str, name: str | None, project_id: int | None
    ) -> SessionRow:
        row = self.conn.execute(
            "INSERT INTO sessions(id, principal, name, project_id, created_at)"
            " VALUES (%s, %s, %s, %s, %s) RETURNING *",
            (session_id, principal, name, project_id, self.now),
        ).fetchone()
        assert row is not None
        return _session(row)

    def get_session(self, session_id: str) -> SessionRow | None:
        row = self.conn.execute("SELECT * FROM sessions WHERE id = %s", (session_id,)).fetchone()
        return _session(row) if row else None

    def list_sessions(self, principal: str, limit: int) -> list[SessionRow]:
        rows = self.conn.execute(
            "SELECT * FROM sessions WHERE principal = %s ORDER BY created_at DESC, id LIMIT %s",
            (principal, limit),
        ).fetchall()
        return [_session(r) for r in rows]

    def end_session(self, session_id: str) -> SessionRow:
        row = self.conn.execute(
            "UPDATE sessions SET status = 'ended', ended_at = %s WHERE id = %s RETURNING *",
            (self.now, session_id),
        ).fetchone()
        if row is None:
            raise not_found(f"session {session_id} not found")
        return _session(row)
