"""Principals, projects, memberships and sessions: who may see and write what."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from memhub.core.errors import not_found
from memhub.core.models import ProjectRole
from memhub.store.base import MemberRow, PrincipalRow, ProjectRow, SessionRow
from memhub.store.crypto import ContentCipher
from memhub.store.sql import SQLITE
from memhub.store.sqlite.sealing import seal, seal_json, unseal

placeholders = SQLITE.placeholders  # "?, ?, …" for as many values


def project_from_row(row: sqlite3.Row, cipher: ContentCipher | None = None) -> ProjectRow:
    return ProjectRow(
        id=row["id"],
        name=unseal(cipher, row["name"], "project_name") or "",
        description=unseal(cipher, row["description"], "project_description"),
        attrs=json.loads(unseal(cipher, row["attrs"], "project_attrs") or "{}"),
        owner=row["owner"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _session(row: sqlite3.Row, cipher: ContentCipher | None) -> SessionRow:
    return SessionRow(
        id=row["id"],
        principal=row["principal"],
        name=unseal(cipher, row["name"], "session_name"),
        project_id=row["project_id"],
        status=row["status"],
        created_at=row["created_at"],
        ended_at=row["ended_at"],
    )


class PeopleMixin:
    """Project names, descriptions and attributes and session names are sealed with a cipher
    (store/sqlite/sealing.py); a project is looked up by its name's deterministic ciphertext."""

    conn: sqlite3.Connection
    now: str
    cipher: ContentCipher | None

    # -- principals and projects ----------------------------------------------------------

    def ensure_principal(self, principal: str, kind: str = "user") -> PrincipalRow:
        """The principal, created on first sight. The first principal of a store is its admin."""
        self.conn.execute(
            "INSERT OR IGNORE INTO principals(id, kind, role, created_at) VALUES (?, ?,"
            " CASE WHEN EXISTS (SELECT 1 FROM principals) THEN 'member' ELSE 'admin' END, ?)",
            (principal, kind, self.now),
        )
        found = self.get_principal(principal)
        assert found is not None
        return found

    def get_principal(self, principal: str) -> PrincipalRow | None:
        row = self.conn.execute("SELECT * FROM principals WHERE id = ?", (principal,)).fetchone()
        if row is None:
            return None
        return PrincipalRow(row["id"], row["kind"], row["role"], row["current_session_id"], row["created_at"])

    def set_api_key(self, principal: str, key_hash: str | None, role: str | None = None) -> None:
        """Give the principal an API key (only its hash is stored); None revokes it."""
        self.conn.execute(
            "UPDATE principals SET api_key_hash = ?, role = coalesce(?, role) WHERE id = ?",
            (key_hash, role, principal),
        )

    def principal_by_key(self, key_hash: str) -> PrincipalRow | None:
        row = self.conn.execute("SELECT id FROM principals WHERE api_key_hash = ?", (key_hash,)).fetchone()
        return self.get_principal(row[0]) if row else None

    def list_principals(self) -> list[PrincipalRow]:
        rows = self.conn.execute("SELECT id FROM principals ORDER BY created_at, id").fetchall()
        return [p for r in rows if (p := self.get_principal(r[0])) is not None]

    def has_api_key(self, principal: str) -> bool:
        row = self.conn.execute("SELECT api_key_hash FROM principals WHERE id = ?", (principal,)).fetchone()
        return bool(row and row[0])

    def set_current_session(self, principal: str, session_id: str | None) -> None:
        self.conn.execute(
            "UPDATE principals SET current_session_id = ? WHERE id = ?", (session_id, principal)
        )

    def insert_project(
        self, name: str, description: str | None, attrs: dict[str, Any], owner: str
    ) -> ProjectRow:
        row = self.conn.execute(
            "INSERT INTO projects(name, description, attrs, owner, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
            (
                seal(self.cipher, name, "project_name"),
                seal(self.cipher, description, "project_description"),
                seal_json(self.cipher, attrs, "project_attrs"),
                owner,
                self.now,
                self.now,
            ),
        ).fetchone()
        self.set_member(row["id"], owner, ProjectRole.OWNER)
        return project_from_row(row, self.cipher)

    def get_project(self, project_id: int) -> ProjectRow | None:
        row = self.conn.execute("SELECT * FROM projects WHERE id = ?", (project_id,)).fetchone()
        return project_from_row(row, self.cipher) if row else None

    def get_project_by_name(self, name: str) -> ProjectRow | None:
        sealed = seal(self.cipher, name, "project_name")
        row = self.conn.execute("SELECT * FROM projects WHERE name = ?", (sealed,)).fetchone()
        return project_from_row(row, self.cipher) if row else None

    def list_projects(self, principal: str, limit: int) -> list[ProjectRow]:
        rows = self.conn.execute(
            "SELECT p.* FROM projects p JOIN project_members m ON m.project_id = p.id"
            " WHERE m.principal = ? ORDER BY p.id DESC LIMIT ?",
            (principal, limit),
        ).fetchall()
        return [project_from_row(r, self.cipher) for r in rows]

    def set_member(self, project_id: int, principal: str, role: ProjectRole) -> None:
        self.conn.execute(
            "INSERT INTO project_members(project_id, principal, role, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(project_id, principal) DO UPDATE SET role = excluded.role",
            (project_id, principal, str(role), self.now),
        )

    def member_role(self, project_id: int, principal: str) -> ProjectRole | None:
        row = self.conn.execute(
            "SELECT role FROM project_members WHERE project_id = ? AND principal = ?",
            (project_id, principal),
        ).fetchone()
        return ProjectRole(row[0]) if row else None

    def update_project(self, project_id: int, name: str | None, description: str | None) -> ProjectRow:
        row = self.conn.execute(
            "UPDATE projects SET name = coalesce(?, name), description = coalesce(?, description),"
            " updated_at = ? WHERE id = ? RETURNING *",
            (
                seal(self.cipher, name, "project_name"),
                seal(self.cipher, description, "project_description"),
                self.now,
                project_id,
            ),
        ).fetchone()
        if row is None:
            raise not_found(f"project {project_id} not found")
        return project_from_row(row, self.cipher)

    def project_item_count(self, project_id: int) -> int:
        row = self.conn.execute("SELECT count(*) FROM items WHERE project_id = ?", (project_id,)).fetchone()
        return int(row[0])

    def delete_project(self, project_id: int) -> None:
        """Deletes the project with its memberships and items (cascade)."""
        self.conn.execute("DELETE FROM projects WHERE id = ?", (project_id,))

    def list_members(self, project_id: int) -> list[MemberRow]:
        rows = self.conn.execute(
            "SELECT * FROM project_members WHERE project_id = ? ORDER BY created_at, principal", (project_id,)
        ).fetchall()
        return [
            MemberRow(r["project_id"], r["principal"], ProjectRole(r["role"]), r["created_at"]) for r in rows
        ]

    def remove_member(self, project_id: int, principal: str) -> bool:
        cur = self.conn.execute(
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
            sql += f" AND m.role IN ({placeholders(roles)})"
            args.extend(str(r) for r in roles)
        rows = self.conn.execute(sql + " ORDER BY p.id DESC LIMIT ?", [*args, limit]).fetchall()
        return [(project_from_row(r, self.cipher), ProjectRole(r["member_role"])) for r in rows]

    # -- sessions -------------------------------------------------------------------------------

    def create_session(
        self, session_id: str, principal: str, name: str | None, project_id: int | None
    ) -> SessionRow:
        row = self.conn.execute(
            "INSERT INTO sessions(id, principal, name, project_id, created_at)"
            " VALUES (?, ?, ?, ?, ?) RETURNING *",
            (session_id, principal, seal(self.cipher, name, "session_name"), project_id, self.now),
        ).fetchone()
        return _session(row, self.cipher)

    def get_session(self, session_id: str) -> SessionRow | None:
        row = self.conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return _session(row, self.cipher) if row else None

    def list_sessions(self, principal: str, limit: int) -> list[SessionRow]:
        rows = self.conn.execute(
            "SELECT * FROM sessions WHERE principal = ? ORDER BY created_at DESC, id LIMIT ?",
            (principal, limit),
        ).fetchall()
        return [_session(r, self.cipher) for r in rows]

    def end_session(self, session_id: str) -> SessionRow:
        row = self.conn.execute(
            "UPDATE sessions SET status = 'ended', ended_at = ? WHERE id = ? RETURNING *",
            (self.now, session_id),
        ).fetchone()
        if row is None:
            raise not_found(f"session {session_id} not found")
        return _session(row, self.cipher)
