"""Items, links and vectors: the statements the SQL backends share (the `Tx` protocol's reads
and the item writes), written once with the backend's `Dialect`.

What stays in each backend: the `where` builder's arguments (`_where`: SQLite can filter
encrypted text), the keyword index (`_index`, `_unindex`), the link upsert (PostgreSQL has
NULLS NOT DISTINCT), storing a vector (PostgreSQL also fills pgvector's column), the subtree
walk. A backend without a cipher (`cipher = None`: PostgreSQL) stores and reads plaintext.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memhub.core.errors import not_found
from memhub.core.models import Viewer
from memhub.core.text import normalize
from memhub.store.base import GROUPABLE, UPDATABLE, ItemBrief, ItemQuery, ItemRow, LinkRow, NewItem
from memhub.store.crypto import ContentCipher
from memhub.store.sql.dialect import Dialect
from memhub.store.sql.rowmap import Columns, item_from_row
from memhub.store.sql.sealing import seal, seal_json, unseal
from memhub.store.sql.visibility import visible

ID_CHUNK = 500  # ids per `IN (...)` list: SQLite bounds the number of parameters

ITEM_COLUMNS = (
    "kind, project_id, session_id, parent_id, owner, scope, boundary_class, status, title, body,"
    " norm_text, tags, attrs, content_hash, importance, created_at, updated_at, expires_at, category"
)

ORDERS = {
    "id_asc": "i.id ASC",
    "id_desc": "i.id DESC",
    "importance_desc": "i.importance DESC, i.id DESC",
    "created_desc": "i.created_at DESC, i.id DESC",
}


def chunks(ids: Sequence[int]) -> list[list[int]]:
    return [list(ids[start : start + ID_CHUNK]) for start in range(0, len(ids), ID_CHUNK)]


class ItemsMixin:
    conn: Any
    dialect: Dialect
    now: str
    cipher: ContentCipher | None = None  # None: text stored as it is

    # -- what each backend provides --------------------------------------------------------

    def _where(self, viewer: Viewer, query: ItemQuery) -> tuple[str, list[Any]]:
        raise NotImplementedError

    def _index(self, item_id: int, title: str | None, body: str, tags: Sequence[str]) -> None:
        raise NotImplementedError

    def _unindex(self, item_id: int) -> None:
        """Drop an item's keyword index row (before it is indexed again)."""
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------------

    def _among(self, column: str, ids: Sequence[int]) -> list[tuple[str, list[Any]]]:
        """(condition, parameters) for `column` among `ids`: one per chunk of at most ID_CHUNK
        ids (one placeholder each), or one for them all where the dialect binds a list as one
        array (PostgreSQL); none for no id."""
        pieces = ([list(ids)] if ids else []) if self.dialect.id_array else chunks(ids)
        return [self.dialect.among(column, piece) for piece in pieces]

    def _item(self, row: Columns) -> ItemRow:
        return item_from_row(row, self.cipher)

    def _seal(self, text: str | None, column: str) -> str | None:
        return self.cipher.encrypt(text, column) if self.cipher is not None else text

    def _items(self, query: ItemQuery) -> str:
        """`items i`, held to primary-key lookups when the query names its ids (Dialect.by_rowid)."""
        return f"items i{self.dialect.by_rowid}" if query.ids is not None else "items i"

    def _scalar(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """The first column of the first row (`sql` names it `v`), or None."""
        row = self.conn.execute(sql, args).fetchone()
        return None if row is None else row["v"]

    # -- items -----------------------------------------------------------------------------

    def insert_item(self, item: NewItem) -> ItemRow:
        tags = list(item.tags)
        row = self.conn.execute(
            f"INSERT INTO items({ITEM_COLUMNS}) VALUES ({self.dialect.placeholders(range(19))}) RETURNING *",
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
        assert row is not None
        self._index(row["id"], item.title, item.body, tags)
        return self._item(row)

    def update_item(self, item_id: int, changes: dict[str, Any]) -> ItemRow:
        """Change columns of one item; new text is re-indexed and its stale vectors dropped."""
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        p = self.dialect.param
        values = dict(changes)
        for key in ("tags", "attrs"):
            if key in values:
                values[key] = seal_json(self.cipher, list(values[key]) if key == "tags" else values[key], key)
        for key in ("title", "body"):
            if key in values:
                values[key] = self._seal(values[key], key)
        if "category" in values:
            values["category"] = seal(self.cipher, values["category"], "category")
        assignments = ", ".join(f"{column} = {p}" for column in values)
        row = self.conn.execute(
            f"UPDATE items SET {assignments}, updated_at = {p} WHERE id = {p} RETURNING *",
            [*values.values(), self.now, item_id],
        ).fetchone()
        if row is None:
            raise not_found(f"item {item_id} not found")
        if {"title", "body", "tags"} & set(changes):
            updated = self._item(row)
            row = self.conn.execute(
                f"UPDATE items SET norm_text = {p} WHERE id = {p} RETURNING *",
                (self._seal(normalize(f"{updated.title or ''}\n{updated.body}"), "norm_text"), item_id),
            ).fetchone()
            assert row is not None
            self._unindex(item_id)
            self.conn.execute(f"DELETE FROM item_tags WHERE item_id = {p}", (item_id,))
            self._index(item_id, updated.title, updated.body, updated.tags)
            self.conn.execute(
                "INSERT INTO vector_log(item_id, embedder, op) SELECT item_id, embedder, 'del' FROM vectors"
                f" WHERE item_id = {p}",
                (item_id,),
            )
            self.conn.execute(f"DELETE FROM vectors WHERE item_id = {p}", (item_id,))
        return self._item(row)

    def delete_items(self, ids: Sequence[int]) -> int:
        total = 0
        for chunk in chunks(ids):
            sql = f"DELETE FROM items WHERE id IN ({self.dialect.placeholders(chunk)})"
            total += int(self.conn.execute(sql, chunk).rowcount)
        return total

    def touch_access(self, counts: Mapping[int, int]) -> None:
        p = self.dialect.param
        pairs = [(n, item_id) for item_id, n in counts.items() if n > 0]
        if pairs:
            self.conn.cursor().executemany(
                f"UPDATE items SET access_count = access_count + {p} WHERE id = {p}", pairs
            )

    def get_item(self, viewer: Viewer, item_id: int, kinds: Sequence[str] = ()) -> ItemRow | None:
        cond, params = visible(viewer, "i", self.dialect)
        sql = f"SELECT i.* FROM items i WHERE i.id = {self.dialect.param} AND {cond}"
        args: list[Any] = [item_id, *params]
        if kinds:
            sql += f" AND i.kind IN ({self.dialect.placeholders(kinds)})"
            args.extend(kinds)
        row = self.conn.execute(sql, args).fetchone()
        return self._item(row) if row else None

    def query_items(self, viewer: Viewer, query: ItemQuery) -> list[ItemRow]:
        where, args = self._where(viewer, query)
        order = ORDERS[query.order]
        sql = (
            f"SELECT i.* FROM {self._items(query)} WHERE {where} ORDER BY {order} LIMIT {self.dialect.param}"
        )
        return [self._item(r) for r in self.conn.execute(sql, [*args, query.limit])]

    def norm_texts(self, ids: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for among, among_args in self._among("id", ids):
            rows = self.conn.execute(f"SELECT id, norm_text FROM items WHERE {among}", among_args)
            if self.cipher is None:
                out.update((int(r["id"]), str(r["norm_text"])) for r in rows)
            else:
                out.update(
                    (int(r["id"]), self.cipher.decrypt(r["norm_text"], "norm_text") or "") for r in rows
                )
        return out

    def query_briefs(self, viewer: Viewer, query: ItemQuery) -> list[ItemBrief]:
        where, args = self._where(viewer, query)
        sql = (
            "SELECT i.id, i.scope, i.project_id, i.session_id, i.importance, i.access_count, i.created_at"
            f" FROM {self._items(query)} WHERE {where} LIMIT {self.dialect.param}"
        )
        return [
            ItemBrief(
                r["id"],
                r["scope"],
                r["project_id"],
                r["session_id"],
                r["importance"],
                r["access_count"],
                r["created_at"],
            )
            for r in self.conn.execute(sql, [*args, query.limit])
        ]

    def count_items(self, viewer: Viewer, query: ItemQuery, cap: int | None = None) -> int:
        """How many items match (at most `cap`, which bounds the work)."""
        where, args = self._where(viewer, query)
        limit = f" LIMIT {self.dialect.param}" if cap is not None else ""
        sql = (
            f"SELECT count(*) AS v FROM (SELECT 1 FROM {self._items(query)} WHERE {where}{limit}) AS matched"
        )
        return int(self._scalar(sql, [*args, cap] if cap is not None else args))

    def group_counts(self, viewer: Viewer, query: ItemQuery, column: str) -> dict[str, int]:
        if column not in GROUPABLE:
            raise ValueError(f"cannot group by {column}")
        where, args = self._where(viewer, query)
        rows = self.conn.execute(
            f"SELECT i.{column} AS value, count(*) AS n FROM {self._items(query)} WHERE {where}"
            f" GROUP BY i.{column} ORDER BY 2 DESC",
            args,
        ).fetchall()
        values = [(r["value"], int(r["n"])) for r in rows]
        if column == "category" and self.cipher is not None:
            values = [(unseal(self.cipher, value, "category"), n) for value, n in values]
        return {str(value) if value is not None else "": n for value, n in values}

    def visible_counts(self, viewer: Viewer) -> list[tuple[str, str, int | None, int]]:
        cond, params = visible(viewer, "i", self.dialect)  # SQLite: the items_visible_counts index
        rows = self.conn.execute(
            "SELECT i.kind AS kind, i.scope AS scope, i.project_id AS project_id, count(*) AS n"
            f" FROM items i WHERE {cond} GROUP BY 1, 2, 3",
            params,
        ).fetchall()
        return [(str(r["kind"]), str(r["scope"]), r["project_id"], int(r["n"])) for r in rows]

    def tag_counts(self, viewer: Viewer, query: ItemQuery, limit: int) -> dict[str, int]:
        where, args = self._where(viewer, query)
        rows = self.conn.execute(
            f"SELECT t.tag AS tag, count(*) AS n FROM item_tags t JOIN items i ON i.id = t.item_id"
            f" WHERE {where} GROUP BY t.tag ORDER BY 2 DESC, 1 LIMIT {self.dialect.param}",
            [*args, limit],
        ).fetchall()
        counts = [(str(unseal(self.cipher, r["tag"], "tag")), int(r["n"])) for r in rows]
        return dict(sorted(counts, key=lambda c: (-c[1], c[0])))

    def visible_ids(
        self, viewer: Viewer, ids: Sequence[int], kinds: Sequence[str], project_id: int | None
    ) -> set[int]:
        """The subset of `ids` the viewer may read (vector and keyword candidates); any number."""
        where, args = self._where(viewer, ItemQuery(kinds=tuple(kinds), project_id=project_id))
        found: set[int] = set()
        for among, among_args in self._among("i.id", ids):
            sql = f"SELECT i.id FROM items i{self.dialect.by_rowid} WHERE {among} AND {where}"
            found.update(int(r["id"]) for r in self.conn.execute(sql, [*among_args, *args]))
        return found

    def item_owners(self, ids: Sequence[int], kinds: Sequence[str]) -> dict[int, str]:
        out: dict[int, str] = {}
        for among, among_args in self._among("id", ids):
            rows = self.conn.execute(
                f"SELECT id, owner FROM items WHERE {among} AND kind IN ({self.dialect.placeholders(kinds)})",
                [*among_args, *kinds],
            )
            out.update((int(r["id"]), str(r["owner"])) for r in rows)
        return out

    def max_item_id(self) -> int:
        return int(self._scalar("SELECT coalesce(max(id), 0) AS v FROM items"))

    # -- links -----------------------------------------------------------------------------

    def links_of(self, ids: Sequence[int], types: Sequence[str]) -> list[LinkRow]:
        """Edges touching any of `ids` (either direction), of the given types (all when empty)."""
        if not ids:
            return []
        src, src_args = self.dialect.among("src", ids)
        dst, dst_args = self.dialect.among("dst", ids)
        sql = f"SELECT * FROM links WHERE ({src} OR {dst})"
        args: list[Any] = [*src_args, *dst_args]
        if types:
            sql += f" AND type IN ({self.dialect.placeholders(types)})"
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

    # -- vectors ---------------------------------------------------------------------------

    def get_vector(self, item_id: int, embedder: str) -> bytes | None:
        p = self.dialect.param
        found = self._scalar(
            f"SELECT vec AS v FROM vectors WHERE item_id = {p} AND embedder = {p}", (item_id, embedder)
        )
        return bytes(found) if found is not None else None

    def get_vectors(self, item_ids: Sequence[int], embedder: str) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        for among, among_args in self._among("item_id", item_ids):
            rows = self.conn.execute(
                f"SELECT item_id, vec FROM vectors WHERE embedder = {self.dialect.param} AND {among}",
                (embedder, *among_args),
            )
            out.update((int(row["item_id"]), bytes(row["vec"])) for row in rows)
        return out

    def missing_vectors(
        self, embedder: str, limit: int, after_id: int = 0, ids: Sequence[int] = ()
    ) -> list[tuple[int, str]]:
        """(item id, text to embed) for items past `after_id` (or among `ids`) lacking a vector."""
        p = self.dialect.param
        where, args = (
            (f"i.id > {p}", [after_id])
            if not ids
            else (f"i.id IN ({self.dialect.placeholders(ids)})", list(ids))
        )
        rows = self.conn.execute(
            "SELECT i.id, i.title, i.body FROM items i"
            f" WHERE {where} AND NOT EXISTS"
            f" (SELECT 1 FROM vectors v WHERE v.item_id = i.id AND v.embedder = {p})"
            f" ORDER BY i.id LIMIT {p}",
            [*args, embedder, limit],
        ).fetchall()
        cipher = self.cipher
        if cipher is None:
            return [(int(r["id"]), f"{r['title'] or ''}\n{r['body']}".strip()) for r in rows]
        return [
            (
                int(r["id"]),
                f"{cipher.decrypt(r['title'], 'title') or ''}\n{cipher.decrypt(r['body'], 'body')}".strip(),
            )
            for r in rows
        ]

    def vector_count(self, embedder: str) -> int:
        return int(
            self._scalar(
                f"SELECT count(*) AS v FROM vectors WHERE embedder = {self.dialect.param}", (embedder,)
            )
        )
