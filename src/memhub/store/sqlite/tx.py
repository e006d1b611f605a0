"""One SQLite transaction: the `Tx` protocol over a connection that is already inside BEGIN."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from memhub.core.hashing import GENESIS_HASH, event_hash
from memhub.core.models import ProjectRole, Viewer
from memhub.core.text import index_text, normalize
from memhub.store.base import EventRow, ItemQuery, ItemRow, NewItem, ProjectRow
from memhub.store.sqlite.visibility import visible

_ITEM_COLUMNS = (
    "kind, project_id, session_id, parent_id, owner, scope, boundary_class, status, title, body,"
    " norm_text, tags, attrs, content_hash, importance, created_at, updated_at, expires_at"
)


def item_from_row(row: sqlite3.Row) -> ItemRow:
    return ItemRow(
        id=row["id"],
        kind=row["kind"],
        project_id=row["project_id"],
        session_id=row["session_id"],
        parent_id=row["parent_id"],
        owner=row["owner"],
        scope=row["scope"],
        boundary_class=row["boundary_class"],
        status=row["status"],
        title=row["title"],
        body=row["body"],
        tags=tuple(json.loads(row["tags"])),
        attrs=json.loads(row["attrs"]),
        content_hash=row["content_hash"],
        importance=row["importance"],
        quality=row["quality"],
        access_count=row["access_count"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        expires_at=row["expires_at"],
    )


def project_from_row(row: sqlite3.Row) -> ProjectRow:
    return ProjectRow(
        id=row["id"],
        name=row["name"],
        description=row["description"],
        attrs=json.loads(row["attrs"]),
        owner=row["owner"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _placeholders(values: Sequence[Any]) -> str:
    return ", ".join("?" for _ in values)


class SqliteTx:
    def __init__(self, conn: sqlite3.Connection, now: str) -> None:
        self.conn = conn
        self.now = now

    # -- principals and projects ----------------------------------------------------------

    def ensure_principal(self, principal: str, kind: str = "user") -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO principals(id, kind, created_at) VALUES (?, ?, ?)",
            (principal, kind, self.now),
        )

    def insert_project(
        self, name: str, description: str | None, attrs: dict[str, Any], owner: str
    ) -> ProjectRow:
        row = self.conn.execute(
            "INSERT INTO projects(name, description, attrs, owner, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
            (name, description, json.dumps(attrs, ensure_ascii=False), owner, self.now, self.now),
        ).fetchone()
        self.set_member(row["id"], owner, ProjectRole.OWNER)
        return project_from_row(row)

    def get_project(self, project_id: int) -> ProjectRow | None:
        row = self.conn.execute("SELECT * FROM projects WHERE id = ?", (project_id,)).fetchone()
        return project_from_row(row) if row else None

    def get_project_by_name(self, name: str) -> ProjectRow | None:
        row = self.conn.execute("SELECT * FROM projects WHERE name = ?", (name,)).fetchone()
        return project_from_row(row) if row else None

    def list_projects(self, principal: str, limit: int) -> list[ProjectRow]:
        rows = self.conn.execute(
            "SELECT p.* FROM projects p JOIN project_members m ON m.project_id = p.id"
            " WHERE m.principal = ? ORDER BY p.id DESC LIMIT ?",
            (principal, limit),
        ).fetchall()
        return [project_from_row(r) for r in rows]

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

    # -- items ----------------------------------------------------------------------------

    def insert_item(self, item: NewItem) -> ItemRow:
        tags = list(item.tags)
        row = self.conn.execute(
            f"INSERT INTO items({_ITEM_COLUMNS}) VALUES ({_placeholders(range(18))}) RETURNING *",
            (
                item.kind,
                item.project_id,
                item.session_id,
                item.parent_id,
                item.owner,
                item.scope,
                item.boundary_class,
                item.status,
                item.title,
                item.body,
                normalize(f"{item.title or ''}\n{item.body}"),
                json.dumps(tags, ensure_ascii=False),
                json.dumps(item.attrs, ensure_ascii=False),
                item.content_hash,
                item.importance,
                self.now,
                self.now,
                item.expires_at,
            ),
        ).fetchone()
        self.conn.execute(
            "INSERT INTO items_fts(rowid, text) VALUES (?, ?)",
            (row["id"], index_text(item.title, item.body, " ".join(tags))),
        )
        return item_from_row(row)

    def get_item(self, viewer: Viewer, item_id: int, kinds: Sequence[str] = ()) -> ItemRow | None:
        cond, params = visible(viewer)
        sql = f"SELECT i.* FROM items i WHERE i.id = ? AND {cond}"
        args: list[Any] = [item_id, *params]
        if kinds:
            sql += f" AND i.kind IN ({_placeholders(kinds)})"
            args.extend(kinds)
        row = self.conn.execute(sql, args).fetchone()
        return item_from_row(row) if row else None

    def query_items(self, viewer: Viewer, query: ItemQuery) -> list[ItemRow]:
        cond, args = visible(viewer)
        where = [cond]
        if query.kinds:
            where.append(f"i.kind IN ({_placeholders(query.kinds)})")
            args.extend(query.kinds)
        if query.project_id is not None:
            where.append("i.project_id = ?")
            args.append(query.project_id)
        if query.top_level:
            where.append("i.parent_id IS NULL")
        elif query.parent_id is not None:
            where.append("i.parent_id = ?")
            args.append(query.parent_id)
        if query.min_id is not None:
            where.append("i.id >= ?")
            args.append(query.min_id)
        for term in query.contains:
            where.append("instr(i.norm_text, ?) > 0")
            args.append(term)
        if query.with_child_kind:
            where.append("EXISTS (SELECT 1 FROM items c WHERE c.parent_id = i.id AND c.kind = ?)")
            args.append(query.with_child_kind)
        if query.without_child_kind:
            where.append("NOT EXISTS (SELECT 1 FROM items c WHERE c.parent_id = i.id AND c.kind = ?)")
            args.append(query.without_child_kind)
        order = "i.id ASC" if query.order == "id_asc" else "i.id DESC"
        sql = f"SELECT i.* FROM items i WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
        args.append(query.limit)
        return [item_from_row(r) for r in self.conn.execute(sql, args)]

    def subtree(self, viewer: Viewer, root_id: int, kind: str, limit: int) -> list[ItemRow]:
        """`root_id` and its descendants of `kind`, breadth first, at most `limit` items."""
        cond, params = visible(viewer)
        rows = self.conn.execute(
            "WITH RECURSIVE tree(id, depth) AS ("
            "  SELECT id, 0 FROM items WHERE id = ? AND kind = ?"
            "  UNION ALL"
            "  SELECT c.id, t.depth + 1 FROM items c JOIN tree t ON c.parent_id = t.id"
            "  WHERE c.kind = ? LIMIT ?"
            f") SELECT i.* FROM items i JOIN tree t ON t.id = i.id WHERE {cond}"
            " ORDER BY t.depth, i.id",
            [root_id, kind, kind, limit, *params],
        ).fetchall()
        return [item_from_row(r) for r in rows]

    def text_search(
        self, viewer: Viewer, match: str, kinds: Sequence[str], project_id: int | None, limit: int
    ) -> list[tuple[int, float]]:
        """(item id, BM25 relevance >= 0, higher is better) for a MATCH expression from core.text."""
        cond, args = visible(viewer)
        where = ["items_fts MATCH ?", cond]
        args = [match, *args]
        if kinds:
            where.append(f"i.kind IN ({_placeholders(kinds)})")
            args.extend(kinds)
        if project_id is not None:
            where.append("i.project_id = ?")
            args.append(project_id)
        rows = self.conn.execute(
            "SELECT i.id, -bm25(items_fts) AS score FROM items_fts JOIN items i ON i.id = items_fts.rowid"
            f" WHERE {' AND '.join(where)} ORDER BY bm25(items_fts) LIMIT ?",
            [*args, limit],
        ).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def visible_ids(
        self, viewer: Viewer, ids: Sequence[int], kinds: Sequence[str], project_id: int | None
    ) -> set[int]:
        """The subset of `ids` the viewer may read (used to filter vector-search candidates)."""
        if not ids:
            return set()
        cond, params = visible(viewer)
        sql = f"SELECT i.id FROM items i WHERE i.id IN ({_placeholders(ids)}) AND {cond}"
        args: list[Any] = [*ids, *params]
        if kinds:
            sql += f" AND i.kind IN ({_placeholders(kinds)})"
            args.extend(kinds)
        if project_id is not None:
            sql += " AND i.project_id = ?"
            args.append(project_id)
        return {r[0] for r in self.conn.execute(sql, args)}

    # -- vectors --------------------------------------------------------------------------

    def missing_vectors(self, embedder: str, limit: int) -> list[tuple[int, str]]:
        """(item id, text to embed) for items that have no vector from `embedder` yet, oldest first."""
        rows = self.conn.execute(
            "SELECT i.id, coalesce(i.title, '') AS title, i.body FROM items i"
            " WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.item_id = i.id AND v.embedder = ?)"
            " ORDER BY i.id LIMIT ?",
            (embedder, limit),
        ).fetchall()
        return [(r["id"], f"{r['title']}\n{r['body']}".strip()) for r in rows]

    def put_vector(self, item_id: int, embedder: str, vec: bytes, dim: int) -> None:
        self.conn.execute(
            "INSERT INTO vectors(item_id, embedder, dim, vec) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(item_id, embedder) DO UPDATE SET dim = excluded.dim, vec = excluded.vec",
            (item_id, embedder, dim, vec),
        )
        self.conn.execute(
            "INSERT INTO vector_log(item_id, embedder, op) VALUES (?, ?, 'put')", (item_id, embedder)
        )

    # -- audit ----------------------------------------------------------------------------

    def append_event(self, principal: str, tool: str, outcome: str, detail: dict[str, Any]) -> EventRow:
        """Append to the hash chain. Runs inside a write transaction, so the chain stays linear
        even when several processes write to one file."""
        last = self.conn.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
        prev = last[0] if last else GENESIS_HASH
        digest = event_hash(prev, self.now, principal, tool, outcome, detail)
        row = self.conn.execute(
            "INSERT INTO events(at, principal, tool, outcome, detail, prev_hash, hash)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (self.now, principal, tool, outcome, json.dumps(detail, ensure_ascii=False), prev, digest),
        ).fetchone()
        return EventRow(row[0], self.now, principal, tool, outcome, detail, prev, digest)
