"""One SQLite transaction: the `Tx` protocol over a connection that is already inside BEGIN."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from memhub.core.errors import not_found
from memhub.core.models import Viewer
from memhub.core.text import index_text, normalize
from memhub.store.base import (
    GROUPABLE,
    UPDATABLE,
    ItemBrief,
    ItemQuery,
    ItemRow,
    LinkRow,
    NewItem,
)
from memhub.store.crypto import ContentCipher
from memhub.store.sql import SQLITE, item_where, visible
from memhub.store.sql.audit import AuditMixin
from memhub.store.sql.claims import ClaimsMixin
from memhub.store.sql.rowmap import item_from_row
from memhub.store.sqlite.fts import (
    TEXT_BUDGET,
    bounded_match,
    match_term,
    newest_cutoff,
    ranked_sql,
    rare_kinds,
)
from memhub.store.sqlite.maintenance import MaintenanceMixin
from memhub.store.sqlite.pce import PceMixin
from memhub.store.sqlite.people import PeopleMixin, placeholders
from memhub.store.sqlite.sealing import seal, seal_json, unseal

ID_CHUNK = 500  # ids per `IN (...)` list: SQLite bounds the number of parameters


def _chunks(ids: Sequence[int]) -> list[list[int]]:
    return [list(ids[start : start + ID_CHUNK]) for start in range(0, len(ids), ID_CHUNK)]


def _items(query: ItemQuery) -> str:
    """`items i`, held to rowid lookups when the query names its ids: without statistics
    (the store never runs ANALYZE) the planner otherwise reads the ids' whole kind through the
    `(kind, scope, ...)` index (at 100k memories 400 candidates took ~100 ms instead of ~2)."""
    return "items i NOT INDEXED" if query.ids is not None else "items i"


_ITEM_COLUMNS = (
    "kind, project_id, session_id, parent_id, owner, scope, boundary_class, status, title, body,"
    " norm_text, tags, attrs, content_hash, importance, created_at, updated_at, expires_at, category"
)


class SqliteTx(PeopleMixin, MaintenanceMixin, PceMixin, AuditMixin, ClaimsMixin):
    conn: sqlite3.Connection
    dialect = SQLITE

    def __init__(
        self, conn: sqlite3.Connection, now: str, *, write: bool = True, cipher: ContentCipher | None = None
    ) -> None:
        self.conn = conn
        self.now = now
        self.write = write
        self.cipher = cipher  # None: text stored as it is

    def _item(self, row: sqlite3.Row) -> ItemRow:
        return item_from_row(row, self.cipher)

    def _seal(self, text: str | None, column: str) -> str | None:
        return self.cipher.encrypt(text, column) if self.cipher is not None else text

    # -- items ----------------------------------------------------------------------------

    def insert_item(self, item: NewItem) -> ItemRow:
        tags = list(item.tags)
        row = self.conn.execute(
            f"INSERT INTO items({_ITEM_COLUMNS}) VALUES ({placeholders(range(19))}) RETURNING *",
            (
                item.kind,
                item.project_id,
                item.session_id,
                item.parent_id,
                item.owner,
                item.scope,
                item.boundary_class,
                item.status,
                self._seal(item.title, "title"),
                self._seal(item.body, "body"),
                self._seal(normalize(f"{item.title or ''}\n{item.body}"), "norm_text"),
                seal_json(self.cipher, tags, "tags"),
                seal_json(self.cipher, item.attrs, "attrs"),
                item.content_hash,
                item.importance,
                item.created_at or self.now,
                item.updated_at or item.created_at or self.now,
                item.expires_at,
                seal(self.cipher, item.category, "category"),
            ),
        ).fetchone()
        self._index(row["id"], item.title, item.body, tags)
        return self._item(row)

    def _index(self, item_id: int, title: str | None, body: str, tags: Sequence[str]) -> None:
        self.conn.execute(
            "INSERT INTO items_fts(rowid, text) VALUES (?, ?)",
            (item_id, self.index_row(title, body, tags)),
        )
        self.conn.executemany(
            "INSERT OR IGNORE INTO item_tags(item_id, tag) VALUES (?, ?)",
            [(item_id, seal(self.cipher, t, "tag")) for t in tags],
        )

    def index_row(self, title: str | None, body: str, tags: Sequence[str]) -> str:
        """What the text index holds for an item: its words, or their blind tokens."""
        text = index_text(title, body, " ".join(tags))
        return self.cipher.blind_text(text) if self.cipher is not None else text

    def update_item(self, item_id: int, changes: dict[str, Any]) -> ItemRow:
        """Change columns of one item; new text is re-indexed and its stale vectors dropped."""
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        values = dict(changes)
        for key in ("tags", "attrs"):
            if key in values:
                values[key] = seal_json(self.cipher, list(values[key]) if key == "tags" else values[key], key)
        for key in ("title", "body"):
            if key in values:
                values[key] = self._seal(values[key], key)
        if "category" in values:
            values["category"] = seal(self.cipher, values["category"], "category")
        text_changed = bool({"title", "body", "tags"} & set(changes))
        assignments = ", ".join(f"{column} = ?" for column in values)
        row = self.conn.execute(
            f"UPDATE items SET {assignments}, updated_at = ? WHERE id = ? RETURNING *",
            [*values.values(), self.now, item_id],
        ).fetchone()
        if row is None:
            raise not_found(f"item {item_id} not found")
        if text_changed:
            updated = self._item(row)
            row = self.conn.execute(
                "UPDATE items SET norm_text = ? WHERE id = ? RETURNING *",
                (self._seal(normalize(f"{updated.title or ''}\n{updated.body}"), "norm_text"), item_id),
            ).fetchone()
            self.conn.execute("DELETE FROM items_fts WHERE rowid = ?", (item_id,))
            self.conn.execute("DELETE FROM item_tags WHERE item_id = ?", (item_id,))
            self._index(item_id, updated.title, updated.body, updated.tags)
            self.conn.execute(
                "INSERT INTO vector_log(item_id, embedder, op) SELECT item_id, embedder, 'del' FROM vectors"
                " WHERE item_id = ?",
                (item_id,),
            )
            self.conn.execute("DELETE FROM vectors WHERE item_id = ?", (item_id,))
        return self._item(row)

    def delete_items(self, ids: Sequence[int]) -> int:
        total = 0
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            total += self.conn.execute(
                f"DELETE FROM items WHERE id IN ({placeholders(chunk)})", chunk
            ).rowcount
        return total

    def touch_access(self, counts: Mapping[int, int]) -> None:
        self.conn.executemany(
            "UPDATE items SET access_count = access_count + ? WHERE id = ?",
            [(n, item_id) for item_id, n in counts.items() if n > 0],
        )

    def get_item(self, viewer: Viewer, item_id: int, kinds: Sequence[str] = ()) -> ItemRow | None:
        cond, params = visible(viewer, "i", SQLITE)
        sql = f"SELECT i.* FROM items i WHERE i.id = ? AND {cond}"
        args: list[Any] = [item_id, *params]
        if kinds:
            sql += f" AND i.kind IN ({placeholders(kinds)})"
            args.extend(kinds)
        row = self.conn.execute(sql, args).fetchone()
        return self._item(row) if row else None

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

    def query_items(self, viewer: Viewer, query: ItemQuery) -> list[ItemRow]:
        where, args = self._where(viewer, query)
        order = {
            "id_asc": "i.id ASC",
            "id_desc": "i.id DESC",
            "importance_desc": "i.importance DESC, i.id DESC",
            "created_desc": "i.created_at DESC, i.id DESC",
        }[query.order]
        sql = f"SELECT i.* FROM {_items(query)} WHERE {where} ORDER BY {order} LIMIT ?"
        return [self._item(r) for r in self.conn.execute(sql, [*args, query.limit])]

    def norm_texts(self, ids: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for chunk in _chunks(ids):
            sql = f"SELECT id, norm_text FROM items WHERE id IN ({placeholders(chunk)})"
            rows = self.conn.execute(sql, chunk)
            if self.cipher is None:
                out.update((int(r[0]), str(r[1])) for r in rows)
            else:
                out.update((int(r[0]), self.cipher.decrypt(r[1], "norm_text") or "") for r in rows)
        return out

    def query_briefs(self, viewer: Viewer, query: ItemQuery) -> list[ItemBrief]:
        where, args = self._where(viewer, query)
        sql = (
            "SELECT i.id, i.scope, i.project_id, i.session_id, i.importance, i.access_count"
            f" FROM {_items(query)} WHERE {where} LIMIT ?"
        )
        return [ItemBrief(*r) for r in self.conn.execute(sql, [*args, query.limit])]

    def count_items(self, viewer: Viewer, query: ItemQuery, cap: int | None = None) -> int:
        """How many items match (at most `cap`, which bounds the work)."""
        where, args = self._where(viewer, query)
        limit = " LIMIT ?" if cap is not None else ""
        sql = f"SELECT count(*) FROM (SELECT 1 FROM {_items(query)} WHERE {where}{limit})"
        return int(self.conn.execute(sql, [*args, cap] if cap is not None else args).fetchone()[0])

    def group_counts(self, viewer: Viewer, query: ItemQuery, column: str) -> dict[str, int]:
        if column not in GROUPABLE:
            raise ValueError(f"cannot group by {column}")
        where, args = self._where(viewer, query)
        rows = self.conn.execute(
            f"SELECT i.{column}, count(*) FROM {_items(query)} WHERE {where}"
            f" GROUP BY i.{column} ORDER BY 2 DESC",
            args,
        ).fetchall()
        if column == "category" and self.cipher is not None:
            rows = [(unseal(self.cipher, r[0], "category"), r[1]) for r in rows]
        return {str(r[0]) if r[0] is not None else "": int(r[1]) for r in rows}

    def visible_counts(self, viewer: Viewer) -> list[tuple[str, str, int | None, int]]:
        cond, params = visible(viewer, "i", SQLITE)  # read from the items_visible_counts index
        rows = self.conn.execute(
            f"SELECT i.kind, i.scope, i.project_id, count(*) FROM items i WHERE {cond} GROUP BY 1, 2, 3",
            params,
        ).fetchall()
        return [(str(r[0]), str(r[1]), r[2], int(r[3])) for r in rows]

    def tag_counts(self, viewer: Viewer, query: ItemQuery, limit: int) -> dict[str, int]:
        where, args = self._where(viewer, query)
        rows = self.conn.execute(
            f"SELECT t.tag, count(*) FROM item_tags t JOIN items i ON i.id = t.item_id WHERE {where}"
            " GROUP BY t.tag ORDER BY 2 DESC, 1 LIMIT ?",
            [*args, limit],
        ).fetchall()
        counts = [(str(unseal(self.cipher, r[0], "tag")), int(r[1])) for r in rows]
        return dict(sorted(counts, key=lambda c: (-c[1], c[0])))

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

    def links_of(self, ids: Sequence[int], types: Sequence[str]) -> list[LinkRow]:
        """Edges touching any of `ids` (either direction), of the given types (all when empty)."""
        if not ids:
            return []
        sql = f"SELECT * FROM links WHERE (src IN ({placeholders(ids)}) OR dst IN ({placeholders(ids)}))"
        args: list[Any] = [*ids, *ids]
        if types:
            sql += f" AND type IN ({placeholders(types)})"
            args.extend(types)
        rows = self.conn.execute(sql + " ORDER BY strength DESC, id", args).fetchall()
        return [
            LinkRow(
                r["id"],
                r["src"],
                r["dst"],
                r["type"],
                unseal(self.cipher, r["subtype"], "link_subtype"),
                r["strength"],
                r["created_at"],
            )
            for r in rows
        ]

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
        expr, min_rowid = bounded_match(self.conn, matches, budget)
        hits = self._ranked_visible(viewer, expr, min_rowid, kinds, project_id, limit, hidden)
        full = " OR ".join(matches)
        if len(hits) < limit and expr != full:  # the rare terms found too few for this viewer
            more = self._ranked_visible(
                viewer, full, newest_cutoff(self.conn, full, budget), kinds, project_id, limit, hidden
            )
            best = dict(hits)
            for item_id, score in more:
                best[item_id] = max(score, best.get(item_id, score))
            hits = sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))
        return hits[:limit]

    def _ranked_visible(
        self,
        viewer: Viewer,
        expr: str,
        min_rowid: int,
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
        hidden: tuple[Viewer, set[int]] | None = None,
    ) -> list[tuple[int, float]]:
        """Up to `limit` best BM25 rows for `expr` from `min_rowid` on that the viewer may read;
        with `hidden` (a wider viewer, a set), the ids ranked at least as high as the last hit
        that the wider viewer may read and this one may not are added to the set."""
        fetch = max(2 * limit, 64)  # most candidates are usually visible: widen when not
        only: tuple[str, ...] = ()
        where, where_args = self._where(viewer, ItemQuery(kinds=tuple(kinds), project_id=project_id))
        while True:
            # the best `fetch` rows and, in the same statement, whether the viewer may read
            # each (the one visibility filter, joined: no second query with their ids)
            sql, args = ranked_sql(expr, min_rowid, fetch, only)
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

    def visible_ids(
        self, viewer: Viewer, ids: Sequence[int], kinds: Sequence[str], project_id: int | None
    ) -> set[int]:
        """The subset of `ids` the viewer may read (vector and keyword candidates); any number."""
        where, args = self._where(viewer, ItemQuery(kinds=tuple(kinds), project_id=project_id))
        found: set[int] = set()
        for chunk in _chunks(ids):
            sql = f"SELECT i.id FROM items i NOT INDEXED WHERE i.id IN ({placeholders(chunk)}) AND {where}"
            found.update(r[0] for r in self.conn.execute(sql, [*chunk, *args]))
        return found

    # -- vectors --------------------------------------------------------------------------

    def get_vector(self, item_id: int, embedder: str) -> bytes | None:
        row = self.conn.execute(
            "SELECT vec FROM vectors WHERE item_id = ? AND embedder = ?", (item_id, embedder)
        ).fetchone()
        return bytes(row[0]) if row else None

    def get_vectors(self, item_ids: Sequence[int], embedder: str) -> dict[int, bytes]:
        if not item_ids:
            return {}
        rows = self.conn.execute(
            f"SELECT item_id, vec FROM vectors WHERE embedder = ? AND item_id IN ({placeholders(item_ids)})",
            (embedder, *item_ids),
        )
        return {int(row[0]): bytes(row[1]) for row in rows}

    def missing_vectors(
        self, embedder: str, limit: int, after_id: int = 0, ids: Sequence[int] = ()
    ) -> list[tuple[int, str]]:
        """(item id, text to embed) for items past `after_id` (or among `ids`) lacking a vector."""
        where, args = ("i.id > ?", [after_id]) if not ids else (f"i.id IN ({placeholders(ids)})", list(ids))
        rows = self.conn.execute(
            "SELECT i.id, i.title, i.body FROM items i"
            f" WHERE {where} AND NOT EXISTS"
            " (SELECT 1 FROM vectors v WHERE v.item_id = i.id AND v.embedder = ?)"
            " ORDER BY i.id LIMIT ?",
            [*args, embedder, limit],
        ).fetchall()
        cipher = self.cipher
        if cipher is None:
            return [(r["id"], f"{r['title'] or ''}\n{r['body']}".strip()) for r in rows]
        return [
            (
                r["id"],
                f"{cipher.decrypt(r['title'], 'title') or ''}\n{cipher.decrypt(r['body'], 'body')}".strip(),
            )
            for r in rows
        ]

    def item_owners(self, ids: Sequence[int], kinds: Sequence[str]) -> dict[int, str]:
        out: dict[int, str] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            rows = self.conn.execute(
                f"SELECT id, owner FROM items WHERE id IN ({placeholders(chunk)})"
                f" AND kind IN ({placeholders(kinds)})",
                [*chunk, *kinds],
            )
            out.update((int(r["id"]), str(r["owner"])) for r in rows)
        return out

    def max_item_id(self) -> int:
        return int(self.conn.execute("SELECT coalesce(max(id), 0) FROM items").fetchone()[0])

    def vector_count(self, embedder: str) -> int:
        return int(
            self.conn.execute("SELECT count(*) FROM vectors WHERE embedder = ?", (embedder,)).fetchone()[0]
        )

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
