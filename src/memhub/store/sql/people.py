"""Principals, projects, memberships and sessions in SQL, for every SQL backend.

A backend's mixin supplies its `Dialect` (statements here are written with `?` placeholders),
and, where it encrypts (SQLite), the sealing of project and session names (`_seal_column`, `_unseal_column`);
PostgreSQL adds a lock around the creation of a store's first principal (its admin).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memhub.core.errors import not_found
from memhub.core.models import ProjectRole
from memhub.store.base import MemberRow, PrincipalRow, ProjectRow, SessionRow
from memhub.store.sql.conn import Connection, Cursor
from memhub.store.sql.dialect import Dialect
from memhub.store.sql.rowmap import Columns


class PeopleMixin:
    conn: Connection
    now: str
    dialect: Dialect

    # -- what a backend may override -------------------------------------------------------

    def _seal_column(self, text: str | None, aad: str) -> str | None:
        """A name or description as stored (sealed where the backend encrypts)."""
        return text

    def _unseal_column(self, value: str | None, aad: str) -> str | None:
        return value

    def _first_principal_lock(self) -> None:
        """Held while a principal is created: the first one is the store's admin."""
        return None

    # -- statements -------------------------------------------------------------------------

    def _run(self, sql: str, args: Sequence[Any] = ()) -> Cursor:
        """One statement written with `?` placeholders, in this backend's dialect."""
        return self.conn.execute(sql.replace("?", self.dialect.param), args)

    def _project(self, row: Columns) -> ProjectRow:
        return ProjectRow(
            id=row["id"],
            name=self._unseal_column(row["name"], "project_name") or "",
            description=self._unseal_column(row["description"], "project_description"),
            attrs=json.loads(self._unseal_column(row["attrs"], "project_attrs") or "{}"),
            owner=row["owner"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )

    def _session(self, row: Columns) -> SessionRow:
        return SessionRow(
            id=row["id"],
            principal=row["principal"],
            name=self._unseal_column(row["name"], "session_name"),
            project_id=row["project_id"],
            status=row["status"],
            created_at=row["created_at"],
            ended_at=row["ended_at"],
        )

    # -- principals -------------------------------------------------------------------------

    def ensure_principal(self, principal: str, kind: str = "user") -> PrincipalRow:
        """The principal, created on first sight. The first principal of a store is its admin."""
        found = self.get_principal(principal)
        if found is not None:
            return found
        self._first_principal_lock()
        self._run(
            "INSERT INTO principals(id, kind, role, created_at) VALUES (?, ?,"
            " CASE WHEN EXISTS (SELECT 1 FROM principals) THEN 'member' ELSE 'admin' END, ?)"
            " ON CONFLICT (id) DO NOTHING",
            (principal, kind, self.now),
        )
        found = self.get_principal(principal)
        assert found is not None
        return found

    def get_principal(self, principal: str) -> PrincipalRow | None:
        row = self._run("SELECT * FROM principals WHERE id = ?", (principal,)).fetchone()
        return _principal(row) if row else None

    def set_api_key(self, principal: str, key_hash: str | None, role: str | None = None) -> None:
        """Give the principal an API key (only its hash is stored); None revokes it."""
        self._run(
            "UPDATE principals SET api_key_hash = ?, role = coalesce(?, role) WHERE id = ?",
            (key_hash, role, principal),
        )

    def principal_by_key(self, key_hash: str) -> PrincipalRow | None:
        row = self._run("SELECT * FROM principals WHERE api_key_hash = ?", (key_hash,)).fetchone()
        return _principal(row) if row else None

    def list_principals(self) -> list[PrincipalRow]:
        rows = self._run("SELECT * FROM principals ORDER BY created_at, id").fetchall()
        return [_principal(r) for r in rows]

    def has_api_key(self, principal: str) -> bool:
        row = self._run("SELECT api_key_hash FROM principals WHERE id = ?", (principal,)).fetchone()
        return bool(row and row["api_key_hash"])

    def set_current_session(self, principal: str, session_id: str | None) -> None:
        self._run("UPDATE principals SET current_session_id = ? WHERE id = ?", (session_id, principal))

    # -- projects and members ---------------------------------------------------------------

    def insert_project(
        self, name: str, description: str | None, attrs: dict[str, Any], owner: str
    ) -> ProjectRow:
        row = self._run(
            "INSERT INTO projects(name, description, attrs, owner, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
            (
                self._seal_column(name, "project_name"),
                self._seal_column(description, "project_description"),
                self._seal_column(json.dumps(attrs, ensure_ascii=False), "project_attrs") or "",
                owner,
                self.now,
                self.now,
            ),
        ).fetchone()
        assert row is not None
        self.set_member(row["id"], owner, ProjectRole.OWNER)
        return self._project(row)

    def get_project(self, project_id: int) -> ProjectRow | None:
        row = self._run("SELECT * FROM projects WHERE id = ?", (project_id,)).fetchone()
        return self._project(row) if row else None

    def get_project_by_name(self, name: str) -> ProjectRow | None:
        """Looked up by the stored name (a deterministic ciphertext where names are sealed)."""
        stored = self._seal_column(name, "project_name")
        row = self._run("SELECT * FROM projects WHERE name = ?", (stored,)).fetchone()
        return self._project(row) if row else None

    def list_projects(self, principal: str, limit: int) -> list[ProjectRow]:
        rows = self._run(
            "SELECT p.* FROM projects p JOIN project_members m ON m.project_id = p.id"
            " WHERE m.principal = ? ORDER BY p.id DESC LIMIT ?",
            (principal, limit),
        ).fetchall()
        return [self._project(r) for r in rows]

    def set_member(self, project_id: int, principal: str, role: ProjectRole) -> None:
        self._run(
            "INSERT INTO project_members(project_id, principal, role, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (project_id, principal) DO UPDATE SET role = excluded.role",
            (project_id, principal, str(role), self.now),
        )

    def member_role(self, project_id: int, principal: str) -> ProjectRole | None:
        row = self._run(
            "SELECT role FROM project_members WHERE project_id = ? AND principal = ?", (project_id, principal)
        ).fetchone()
        return ProjectRole(row["role"]) if row else None

    def update_project(self, project_id: int, name: str | None, description: str | None) -> ProjectRow:
        row = self._run(
            "UPDATE projects SET name = coalesce(?, name), description = coalesce(?, description),"
            " updated_at = ? WHERE id = ? RETURNING *",
            (
                self._seal_column(name, "project_name"),
                self._seal_column(description, "project_description"),
                self.now,
                project_id,
            ),
        ).fetchone()
        if row is None:
            raise not_found(f"project {project_id} not found")
        return self._project(row)

    def project_item_count(self, project_id: int) -> int:
        row = self._run("SELECT count(*) AS n FROM items WHERE project_id = ?", (project_id,)).fetchone()
        return int(row["n"]) if row else 0

    def delete_project(self, project_id: int) -> None:
        """Deletes the project with its memberships and items (cascade)."""
        self._run("DELETE FROM projects WHERE id = ?", (project_id,))

    def list_members(self, project_id: int) -> list[MemberRow]:
        rows = self._run(
            "SELECT * FROM project_members WHERE project_id = ? ORDER BY created_at, principal", (project_id,)
        ).fetchall()
        return [
            MemberRow(r["project_id"], r["principal"], ProjectRole(r["role"]), r["created_at"]) for r in rows
        ]

    def remove_member(self, project_id: int, principal: str) -> bool:
        cur = self._run(
            "DELETE FROM project_members WHERE project_id = ? AND principal = ?", (project_id, principal)
        )
        return cur.rowcount > 0

    def list_memberships(
        self, principal: str, roles: Sequence[ProjectRole], limit: int
    ) -> list[tuple[ProjectRow, ProjectRole]]:
        sql = (
            "SELECT p.*, m.role AS member_role FROM projects p JOIN project_members m ON m.project_id = p.id"
            " WHERE m.principal = ?"
        )
        args: list[Any] = [principal]
        if roles:
            sql += f" AND m.role IN ({', '.join('?' for _ in roles)})"
            args.extend(str(r) for r in roles)
        rows = self._run(sql + " ORDER BY p.id DESC LIMIT ?", [*args, limit]).fetchall()
        return [(self._project(r), ProjectRole(r["member_role"])) for r in rows]

    # -- sessions ---------------------------------------------------------------------------

    def create_session(
        self, session_id: str, principal: str, name: str | None, project_id: int | None
    ) -> SessionRow:
        row = self._run(
            "INSERT INTO sessions(id, principal, name, project_id, created_at)"
            " VALUES (?, ?, ?, ?, ?) RETURNING *",
            (session_id, principal, self._seal_column(name, "session_name"), project_id, self.now),
        ).fetchone()
        assert row is not None
        return self._session(row)

    def get_session(self, session_id: str) -> SessionRow | None:
        row = self._run("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return self._session(row) if row else None

    def list_sessions(self, principal: str, limit: int) -> list[SessionRow]:
        rows = self._run(
            "SELECT * FROM sessions WHERE principal = ? ORDER BY created_at DESC, id LIMIT ?",
            (principal, limit),
        ).fetchall()
        return [self._session(r) for r in rows]

    def end_session(self, session_id: str) -> SessionRow:
        row = self._run(
            "UPDATE sessions SET status = 'ended', ended_at = ? WHERE id = ? RETURNING *",
            (self.now, session_id),
        ).fetchone()
        if row is None:
            raise not_found(f"session {session_id} not found")
        return self._session(row)


def _principal(row: Columns) -> PrincipalRow:
    return PrincipalRow(row["id"], row["kind"], row["role"], row["current_session_id"], row["created_at"])
