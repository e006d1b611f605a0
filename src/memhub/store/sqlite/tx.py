"""One SQLite transaction: the `Tx` protocol over a connection that is already inside BEGIN."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from memhub.core.models import Viewer
from memhub.core.text import index_text
from memhub.store.base import (
    ItemQuery,
    ItemRow,
)
from memhub.store.crypto import ContentCipher
from memhub.store.sql import SQLITE, item_where, visible
from memhub.store.sql.audit import AuditMixin
from memhub.store.sql.budget import TEXT_BUDGET
from memhub.store.sql.claims import ClaimsMixin
from memhub.store.sql.items import ItemsMixin
from memhub.store.sqlite.errors import storage_errors
from memhub.store.sqlite.fts import (
    bounded_match,
    match_term,
    ranked_sql,
    rare_kinds,
)
from memhub.store.sqlite.maintenance import MaintenanceMixin
from memhub.store.sqlite.pce import PceMixin
from memhub.store.sqlite.people import PeopleMixin, placeholders
from memhub.store.sqlite.sealing import seal


class SqliteTx(ItemsMixin, PeopleMixin, MaintenanceMixin, PceMixin, AuditMixin, ClaimsMixin):
    conn: sqlite3.Connection
    dialect = SQLITE

    def __init__(
        self, conn: sqlite3.Connection, now: str, *, write: bool = True, cipher: ContentCipher | None = None
    ) -> None:
        self.conn = conn
        self.now = now
        self.write = write
        self.cipher = cipher  # None: text stored as it is

    def failures(self) -> AbstractContextManager[None]:
        return storage_errors()

    # -- items ----------------------------------------------------------------------------

    def _index(self, item_id: int, title: str | None, body: str, tags: Sequence[str]) -> None:
        self.conn.execute(
            "INSERT INTO items_fts(rowid, text) VALUES (?, ?)",
            (item_id, self.index_row(title, body, tags)),
        )
        self.conn.executemany(
            "INSERT OR IGNORE INTO item_tags(item_id, tag) VALUES (?, ?)",
            [(item_id, seal(self.cipher, t, "tag")) for t in tags],
        )

    def _unindex(self, item_id: int) -> None:
        self.conn.execute("DELETE FROM items_fts WHERE rowid = ?", (item_id,))

    def index_row(self, title: str | None, body: str, tags: Sequence[str]) -> str:
        """What the text index holds for an item: its words, or their blind tokens."""
        text = index_text(title, body, " ".join(tags))
        return self.cipher.blind_text(text) if self.cipher is not None else text

    def _where(self, viewer: Viewer, query: ItemQuery) -> tuple[str, list[Any]]:
        return item_where(
            viewer,
            query,
            SQLITE,
            encrypted=self.cipher is not None,
            tag_rows=self._tag_rows,
            sealed=self._fixed,
        )

    def _fixed(self, values: Sequence[str], aad: str) -> list[str]:
        """Values of a deterministically sealed column as stored (store/sqlite/sealing.py)."""
        return [seal(self.cipher, v, aad) or "" for v in values]

    def _tag_rows(self, tags: Sequence[str]) -> int:
        sql = f"SELECT count(*) FROM item_tags WHERE tag IN ({placeholders(tags)})"
        return int(self.conn.execute(sql, list(tags)).fetchone()[0])

    # -- links ----------------------------------------------------------------------------

    def upsert_link(self, src: int, dst: int, type: str, subtype: str | None, strength: float) -> None:
        """One edge per (src, dst, type, subtype); a repeated edge keeps the stronger strength.
        (An update first: the UNIQUE constraint treats a NULL subtype as distinct from another.)"""
        updated = self.conn.execute(
            "UPDATE links SET strength = max(strength, ?)"
            " WHERE src = ? AND dst = ? AND type = ? AND subtype IS ?",
            (strength, src, dst, type, sealed := seal(self.cipher, subtype, "link_subtype")),
        ).rowcount
        if not updated:
            self.conn.execute(
                "INSERT INTO links(src, dst, type, subtype, strength, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (src, dst, type, sealed, strength, self.now),
            )

    def subtree(self, viewer: Viewer, root_id: int, kind: str, limit: int) -> list[ItemRow]:
        """`root_id` and its descendants of `kind`, breadth first, at most `limit` items."""
        cond, params = visible(viewer, "i", SQLITE)
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
        return [self._item(r) for r in rows]

    def text_search(
        self,
        viewer: Viewer,
        terms: Sequence[str],
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
        budget: int = TEXT_BUDGET,
    ) -> list[tuple[int, float]]:
        """(item id, BM25 relevance >= 0, higher is better) for plain `terms`, OR-ed; at most
        ~`budget` matching rows are ranked (store/sqlite/fts.py)."""
        return self._text_search(viewer, terms, kinds, project_id, limit, budget, None)

    def text_search_hidden(
        self,
        viewer: Viewer,
        wider: Viewer,
        terms: Sequence[str],
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
        budget: int = TEXT_BUDGET,
    ) -> tuple[list[tuple[int, float]], int]:
        """`text_search`'s hits, and how many of the rows it ranked at least as high as its
        last hit `wider` may read but `viewer` may not (counted in the same query)."""
        hidden: set[int] = set()
        hits = self._text_search(viewer, terms, kinds, project_id, limit, budget, (wider, hidden))
        return hits, len(hidden)

    def _text_search(
        self,
        viewer: Viewer,
        terms: Sequence[str],
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
        budget: int,
        hidden: tuple[Viewer, set[int]] | None,
    ) -> list[tuple[int, float]]:
        build = self.cipher.match_term if self.cipher is not None else match_term
        matches = [m for term in terms if term and (m := build(term))]
        if not matches or limit <= 0:
            return []
        expr, newest = bounded_match(self.conn, matches, budget)
        hits = self._ranked_visible(viewer, expr, newest, kinds, project_id, limit, hidden)
        full = " OR ".join(matches)
        if len(hits) < limit and expr != full:  # the rare terms found too few for this viewer
            more = self._ranked_visible(viewer, full, budget, kinds, project_id, limit, hidden)
            best = dict(hits)
            for item_id, score in more:
                best[item_id] = max(score, best.get(item_id, score))
            hits = sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))
        return hits[:limit]

    def _ranked_visible(
        self,
        viewer: Viewer,
        expr: str,
        newest: int,
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
        hidden: tuple[Viewer, set[int]] | None = None,
    ) -> list[tuple[int, float]]:
        """Up to `limit` best BM25 rows for `expr` (of its `newest` newest matches when > 0:
        fts.ranked_sql) that the viewer may read; with `hidden` (a wider viewer, a set), the ids
        ranked at least as high as the last hit that the wider viewer may read and this one may
        not are added to the set."""
        fetch = max(2 * limit, 64)  # most candidates are usually visible: widen when not
        only: tuple[str, ...] = ()
        where, where_args = self._where(viewer, ItemQuery(kinds=tuple(kinds), project_id=project_id))
        while True:
            # the best `fetch` rows and, in the same statement, whether the viewer may read
            # each (the one visibility filter, joined: no second query with their ids)
            sql, args = ranked_sql(expr, newest, fetch, only)
            joined = self.conn.execute(
                f"SELECT f.rowid, f.score, CASE WHEN {where} THEN 1 ELSE 0 END"
                f" FROM ({sql}) f LEFT JOIN items i ON i.id = f.rowid ORDER BY f.score DESC, f.rowid",
                [*where_args, *args],
            ).fetchall()
            rows = [(int(r[0]), float(r[1])) for r in joined]
            passed = {int(r[0]) for r in joined if r[2]}
            hits = [(item_id, score) for item_id, score in rows if item_id in passed]
            if not only and len(hits) < limit and len(rows) == fetch and rare_kinds(self.conn, kinds):
                only = tuple(kinds)  # other kinds crowd the best rows out: rank these kinds' rows
                continue
            if len(hits) >= limit or len(rows) < fetch:
                if hidden is not None:
                    floor = hits[limit - 1][1] if len(hits) >= limit else -1.0
                    above = [i for i, score in rows if score >= floor and i not in passed]
                    wider, found = hidden
                    found.update(self.visible_ids(wider, above, kinds, project_id))
                return hits[:limit]
            fetch *= 4

    # -- vectors --------------------------------------------------------------------------

    def put_vector(self, item_id: int, embedder: str, vec: bytes, dim: int) -> bool:
        stored = self.conn.execute(
            "INSERT INTO vectors(item_id, embedder, dim, vec) SELECT ?, ?, ?, ?"
            " WHERE EXISTS (SELECT 1 FROM items WHERE id = ?)"
            " ON CONFLICT(item_id, embedder) DO UPDATE SET dim = excluded.dim, vec = excluded.vec",
            (item_id, embedder, dim, vec, item_id),
        ).rowcount
        if not stored:
            return False  # deleted while it was being embedded
        self.conn.execute(
            "INSERT INTO vector_log(item_id, embedder, op) VALUES (?, ?, 'put')", (item_id, embedder)
        )
        return True
