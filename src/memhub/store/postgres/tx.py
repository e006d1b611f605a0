"""One PostgreSQL transaction: the `Tx` protocol over a pooled connection already inside BEGIN.

The conditions on items come from store/sql/ (the one visibility filter, the `where` builder)
with the POSTGRESQL dialect; the keyword index is store/postgres/text.py. Text is stored as it
is: content encryption is refused when the store opens (store/postgres/database.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from psycopg import Connection
from psycopg.rows import DictRow

from memhub.core.errors import not_found
from memhub.core.models import Viewer
from memhub.core.text import normalize
from memhub.store.base import GROUPABLE, UPDATABLE, ItemBrief, ItemQuery, ItemRow, LinkRow, NewItem
from memhub.store.postgres import bm25, text
from memhub.store.postgres.maintenance import MaintenanceMixin
from memhub.store.postgres.people import PeopleMixin
from memhub.store.sql import POSTGRESQL, item_where, visible
from memhub.store.sql.audit import AuditMixin
from memhub.store.sql.budget import bounded
from memhub.store.sql.claims import ClaimsMixin
from memhub.store.sql.pce import PceMixin
from memhub.store.sql.rowmap import item_from_row

TEXT_BUDGET = 5_000  # rows ranked per query at most (as on SQLite)
ID_CHUNK = 500
AUDIT_LOCK = 0x6D656D6875620002  # pg_advisory_xact_lock key: one audit chain head at a time
placeholders = POSTGRESQL.placeholders

_ITEM_COLUMNS = (
    "kind, project_id, session_id, parent_id, owner, scope, boundary_class, status, title, body,"
    " norm_text, tags, attrs, content_hash, importance, created_at, updated_at, expires_at, category"
)


def _chunks(ids: Sequence[int]) -> list[list[int]]:
    return [list(ids[start : start + ID_CHUNK]) for start in range(0, len(ids), ID_CHUNK)]


class PostgresTx(PeopleMixin, MaintenanceMixin, PceMixin, AuditMixin, ClaimsMixin):
    conn: Connection[DictRow]
    dialect = POSTGRESQL

    def __init__(self, conn: Connection[DictRow], now: str, *, write: bool, hnsw: set[int]) -> None:
        self.conn = conn
        self.now = now
        self.write = write
        self._hnsw = hnsw  # dimensions known to have their HNSW index (shared by the store)

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        row = self.conn.execute(sql, args).fetchone()
        return None if row is None else next(iter(row.values()))

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
                item.title,
                item.body,
                normalize(f"{item.title or ''}\n{item.body}"),
                json.dumps(tags, ensure_ascii=False),
                json.dumps(item.attrs, ensure_ascii=False),
                item.content_hash,
                item.importance,
                item.created_at or self.now,
                item.updated_at or item.created_at or self.now,
                item.expires_at,
                item.category,
            ),
        ).fetchone()
        assert row is not None
        self._index(row["id"], item.title, item.body, tags)
        return item_from_row(row)

    def _index(self, item_id: int, title: str | None, body: str, tags: Sequence[str]) -> None:
        self.conn.execute(
            "INSERT INTO items_fts(item_id, text) VALUES (%s, %s::tsvector)",
            (item_id, text.tsvector(title, body, tags)),
        )
        if tags:
            self.conn.cursor().executemany(
                "INSERT INTO item_tags(item_id, tag) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                [(item_id, t) for t in tags],
            )

    def update_item(self, item_id: int, changes: dict[str, Any]) -> ItemRow:
        """Change columns of one item; new text is re-indexed and its stale vectors dropped."""
        unknown = set(changes) - UPDATABLE
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        values = dict(changes)
        if "tags" in values:
            values["tags"] = json.dumps(list(values["tags"]), ensure_ascii=False)
        if "attrs" in values:
            values["attrs"] = json.dumps(values["attrs"], ensure_ascii=False)
        assignments = ", ".join(f"{column} = %s" for column in values)
        row = self.conn.execute(
            f"UPDATE items SET {assignments}, updated_at = %s WHERE id = %s RETURNING *",
            [*values.values(), self.now, item_id],
        ).fetchone()
        if row is None:
            raise not_found(f"item {item_id} not found")
        if {"title", "body", "tags"} & set(changes):
            updated = item_from_row(row)
            row = self.conn.execute(
                "UPDATE items SET norm_text = %s WHERE id = %s RETURNING *",
                (normalize(f"{updated.title or ''}\n{updated.body}"), item_id),
            ).fetchone()
            assert row is not None
            self.conn.execute("DELETE FROM items_fts WHERE item_id = %s", (item_id,))
            self.conn.execute("DELETE FROM item_tags WHERE item_id = %s", (item_id,))
            self._index(item_id, updated.title, updated.body, updated.tags)
            self.conn.execute(
                "INSERT INTO vector_log(item_id, embedder, op) SELECT item_id, embedder, 'del' FROM vectors"
                " WHERE item_id = %s",
                (item_id,),
            )
            self.conn.execute("DELETE FROM vectors WHERE item_id = %s", (item_id,))
        return item_from_row(row)

    def delete_items(self, ids: Sequence[int]) -> int:
        total = 0
        for chunk in _chunks(ids):
            sql = f"DELETE FROM items WHERE id IN ({placeholders(chunk)})"
            total += self.conn.execute(sql, chunk).rowcount
        return total

    def touch_access(self, counts: Mapping[int, int]) -> None:
        pairs = [(n, item_id) for item_id, n in counts.items() if n > 0]
        if pairs:
            self.conn.cursor().executemany(
                "UPDATE items SET access_count = access_count + %s WHERE id = %s", pairs
            )

    def get_item(self, viewer: Viewer, item_id: int, kinds: Sequence[str] = ()) -> ItemRow | None:
        cond, params = visible(viewer, "i", POSTGRESQL)
        sql = f"SELECT i.* FROM items i WHERE i.id = %s AND {cond}"
        args: list[Any] = [item_id, *params]
        if kinds:
            sql += f" AND i.kind IN ({placeholders(kinds)})"
            args.extend(kinds)
        row = self.conn.execute(sql, args).fetchone()
        return item_from_row(row) if row else None

    def _where(self, viewer: Viewer, query: ItemQuery) -> tuple[str, list[Any]]:
        return item_where(viewer, query, POSTGRESQL)

    def query_items(self, viewer: Viewer, query: ItemQuery) -> list[ItemRow]:
        where, args = self._where(viewer, query)
        order = {
            "id_asc": "i.id ASC",
            "id_desc": "i.id DESC",
            "importance_desc": "i.importance DESC, i.id DESC",
            "created_desc": "i.created_at DESC, i.id DESC",
        }[query.order]
        sql = f"SELECT i.* FROM items i WHERE {where} ORDER BY {order} LIMIT %s"
        return [item_from_row(r) for r in self.conn.execute(sql, [*args, query.limit])]

    def norm_texts(self, ids: Sequence[int]) -> dict[int, str]:
        out: dict[int, str] = {}
        for chunk in _chunks(ids):
            sql = f"SELECT id, norm_text FROM items WHERE id IN ({placeholders(chunk)})"
            out.update((int(r["id"]), str(r["norm_text"])) for r in self.conn.execute(sql, chunk))
        return out

    def query_briefs(self, viewer: Viewer, query: ItemQuery) -> list[ItemBrief]:
        where, args = self._where(viewer, query)
        sql = (
            "SELECT i.id, i.scope, i.project_id, i.session_id, i.importance, i.access_count"
            f" FROM items i WHERE {where} LIMIT %s"
        )
        return [ItemBrief(*r.values()) for r in self.conn.execute(sql, [*args, query.limit])]

    def count_items(self, viewer: Viewer, query: ItemQuery, cap: int | None = None) -> int:
        where, args = self._where(viewer, query)
        limit = " LIMIT %s" if cap is not None else ""
        sql = f"SELECT count(*) AS n FROM (SELECT 1 FROM items i WHERE {where}{limit}) AS matched"
        return int(self._one(sql, [*args, cap] if cap is not None else args))

    def group_counts(self, viewer: Viewer, query: ItemQuery, column: str) -> dict[str, int]:
        if column not in GROUPABLE:
            raise ValueError(f"cannot group by {column}")
        where, args = self._where(viewer, query)
        rows = self.conn.execute(
            f"SELECT i.{column} AS value, count(*) AS n FROM items i WHERE {where}"
            f" GROUP BY i.{column} ORDER BY 2 DESC",
            args,
        ).fetchall()
        return {str(r["value"]) if r["value"] is not None else "": int(r["n"]) for r in rows}

    def visible_counts(self, viewer: Viewer) -> list[tuple[str, str, int | None, int]]:
        cond, params = visible(viewer, "i", POSTGRESQL)
        rows = self.conn.execute(
            f"SELECT i.kind AS kind, i.scope AS scope, i.project_id AS project_id, count(*) AS n"
            f" FROM items i WHERE {cond} GROUP BY 1, 2, 3",
            params,
        ).fetchall()
        return [(str(r["kind"]), str(r["scope"]), r["project_id"], int(r["n"])) for r in rows]

    def tag_counts(self, viewer: Viewer, query: ItemQuery, limit: int) -> dict[str, int]:
        where, args = self._where(viewer, query)
        rows = self.conn.execute(
            f"SELECT t.tag, count(*) AS n FROM item_tags t JOIN items i ON i.id = t.item_id WHERE {where}"
            " GROUP BY t.tag ORDER BY 2 DESC, 1 LIMIT %s",
            [*args, limit],
        ).fetchall()
        return dict(sorted(((str(r["tag"]), int(r["n"])) for r in rows), key=lambda c: (-c[1], c[0])))

    def subtree(self, viewer: Viewer, root_id: int, kind: str, limit: int) -> list[ItemRow]:
        """`root_id` and its descendants of `kind`, breadth first, at most `limit` items."""
        cond, params = visible(viewer, "i", POSTGRESQL)
        rows = self.conn.execute(
            "WITH RECURSIVE tree(id, depth) AS ("
            "  SELECT id, 0 FROM items WHERE id = %s AND kind = %s"
            "  UNION ALL"
            "  SELECT c.id, t.depth + 1 FROM items c JOIN tree t ON c.parent_id = t.id WHERE c.kind = %s"
            "), first AS (SELECT id, depth FROM tree ORDER BY depth, id LIMIT %s)"
            f" SELECT i.* FROM items i JOIN first t ON t.id = i.id WHERE {cond}"
            " ORDER BY t.depth, i.id",
            [root_id, kind, kind, limit, *params],
        ).fetchall()
        return [item_from_row(r) for r in rows]

    # -- keyword search ---------------------------------------------------------------------

    def text_search(
        self,
        viewer: Viewer,
        terms: Sequence[str],
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
        budget: int = TEXT_BUDGET,
    ) -> list[tuple[int, float]]:
        """(item id, relevance >= 0, higher is better) for plain `terms`, OR-ed; at most
        ~`budget` matching rows are ranked (store/sql/budget.py)."""
        wanted = {t.query: t for term in terms if (t := text.term(term))}  # one of each tsquery
        if not wanted or limit <= 0:
            return []
        counts: dict[str, int] = {}
        chosen: dict[str, list[str]] = {}

        def count(expr: str) -> int:
            if expr not in counts:
                counts[expr] = self._count(expr)
            return counts[expr]

        def join(queries: Sequence[str]) -> str:
            expr = text.any_of(queries)
            chosen[expr] = list(queries)
            return expr

        expr, min_id = bounded(list(wanted), budget, count, join, self._newest)
        kept = [wanted[q] for q in chosen[expr]]
        hits = self._ranked_visible(viewer, kept, expr, min_id, count, kinds, project_id, limit)
        full = join(list(wanted))
        if len(hits) < limit and expr != full:  # the rare terms found too few for this viewer
            cutoff = self._newest(full, budget)
            every = list(wanted.values())
            more = self._ranked_visible(viewer, every, full, cutoff, count, kinds, project_id, limit)
            best = dict(hits)
            for item_id, score in more:
                best[item_id] = max(score, best.get(item_id, score))
            hits = sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))
        return hits[:limit]

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
        """`text_search` for `viewer`, and how many rows that rank at least as high as the last
        hit (all of them when fewer than `limit` were found) `wider` may read but `viewer` may
        not: two ranked reads here (SQLite counts them in its one query)."""
        hits = self.text_search(viewer, terms, kinds, project_id, limit, budget)
        floor = hits[-1][1] if len(hits) >= limit else float("-inf")
        wide = self.text_search(wider, terms, kinds, project_id, max(4 * limit, 64), budget)
        above = [item_id for item_id, score in wide if score >= floor]
        return hits, len(set(above) - self.visible_ids(viewer, above, kinds, project_id))

    def _count(self, expr: str) -> int:
        return int(self._one("SELECT count(*) FROM items_fts WHERE text @@ %s::tsquery", [expr]))

    def _newest(self, expr: str, budget: int) -> int:
        found = self._one(
            "SELECT item_id FROM items_fts WHERE text @@ %s::tsquery ORDER BY item_id DESC LIMIT 1 OFFSET %s",
            [expr, budget - 1],
        )
        return int(found) if found is not None else 0

    def _ranked_visible(
        self,
        viewer: Viewer,
        terms: Sequence[bm25.Term],
        expr: str,
        min_id: int,
        count: Callable[[str], int],
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        """The best `limit` matches of `expr` the viewer may read, by BM25 (store/postgres/bm25.py)."""
        ranked = bm25.ranked(self.conn, terms, expr, min_id, count)
        hits: list[tuple[int, float]] = []
        start, fetch = 0, max(2 * limit, 64)  # most candidates are usually visible: widen when not
        while start < len(ranked) and len(hits) < limit:
            chunk = ranked[start : start + fetch]
            passed = self.visible_ids(viewer, [item_id for item_id, _ in chunk], kinds, project_id)
            hits.extend((item_id, score) for item_id, score in chunk if item_id in passed)
            start, fetch = start + fetch, fetch * 4
        return hits[:limit]

    def visible_ids(
        self, viewer: Viewer, ids: Sequence[int], kinds: Sequence[str], project_id: int | None
    ) -> set[int]:
        where, args = self._where(viewer, ItemQuery(kinds=tuple(kinds), project_id=project_id))
        found: set[int] = set()
        for chunk in _chunks(ids):
            sql = f"SELECT i.id FROM items i WHERE i.id IN ({placeholders(chunk)}) AND {where}"
            found.update(int(r["id"]) for r in self.conn.execute(sql, [*chunk, *args]))
        return found

    def item_owners(self, ids: Sequence[int], kinds: Sequence[str]) -> dict[int, str]:
        out: dict[int, str] = {}
        for chunk in _chunks(ids):
            rows = self.conn.execute(
                f"SELECT id, owner FROM items WHERE id IN ({placeholders(chunk)})"
                f" AND kind IN ({placeholders(kinds)})",
                [*chunk, *kinds],
            )
            out.update((int(r["id"]), str(r["owner"])) for r in rows)
        return out

    def max_item_id(self) -> int:
        return int(self._one("SELECT coalesce(max(id), 0) FROM items"))

    # -- links ----------------------------------------------------------------------------

    def upsert_link(self, src: int, dst: int, type: str, subtype: str | None, strength: float) -> None:
        """One edge per (src, dst, type, subtype) (NULLS NOT DISTINCT); the stronger strength wins."""
        self.conn.execute(
            "INSERT INTO links(src, dst, type, subtype, strength, created_at) VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (src, dst, type, subtype)"
            " DO UPDATE SET strength = greatest(links.strength, excluded.strength)",
            (src, dst, type, subtype, strength, self.now),
        )

    def links_of(self, ids: Sequence[int], types: Sequence[str]) -> list[LinkRow]:
        if not ids:
            return []
        sql = f"SELECT * FROM links WHERE (src IN ({placeholders(ids)}) OR dst IN ({placeholders(ids)}))"
        args: list[Any] = [*ids, *ids]
        if types:
            sql += f" AND type IN ({placeholders(types)})"
            args.extend(types)
        rows = self.conn.execute(sql + " ORDER BY strength DESC, id", args).fetchall()
        return [
            LinkRow(r["id"], r["src"], r["dst"], r["type"], r["subtype"], r["strength"], r["created_at"])
            for r in rows
        ]

    # -- vectors --------------------------------------------------------------------------

    def get_vector(self, item_id: int, embedder: str) -> bytes | None:
        found = self._one("SELECT vec FROM vectors WHERE item_id = %s AND embedder = %s", (item_id, embedder))
        return bytes(found) if found is not None else None

    def get_vectors(self, item_ids: Sequence[int], embedder: str) -> dict[int, bytes]:
        if not item_ids:
            return {}
        rows = self.conn.execute(
            "SELECT item_id, vec FROM vectors WHERE embedder = %s AND item_id = ANY(%s)",
            (embedder, list(item_ids)),
        )
        return {int(row["item_id"]): bytes(row["vec"]) for row in rows}

    def missing_vectors(
        self, embedder: str, limit: int, after_id: int = 0, ids: Sequence[int] = ()
    ) -> list[tuple[int, str]]:
        where, args = ("i.id > %s", [after_id]) if not ids else (f"i.id IN ({placeholders(ids)})", list(ids))
        rows = self.conn.execute(
            "SELECT i.id, i.title, i.body FROM items i"
            f" WHERE {where} AND NOT EXISTS"
            " (SELECT 1 FROM vectors v WHERE v.item_id = i.id AND v.embedder = %s)"
            " ORDER BY i.id LIMIT %s",
            [*args, embedder, limit],
        ).fetchall()
        return [(int(r["id"]), f"{r['title'] or ''}\n{r['body']}".strip()) for r in rows]

    def vector_count(self, embedder: str) -> int:
        return int(self._one("SELECT count(*) FROM vectors WHERE embedder = %s", (embedder,)))

    def put_vector(self, item_id: int, embedder: str, vec: bytes, dim: int) -> bool:
        values = np.frombuffer(vec, dtype="<f4").astype(float).tolist()
        stored = self.conn.execute(
            "INSERT INTO vectors(item_id, embedder, dim, vec, embedding)"
            " SELECT %s, %s, %s, %s, CAST(%s AS float8[])::vector"
            " WHERE EXISTS (SELECT 1 FROM items WHERE id = %s)"
            " ON CONFLICT (item_id, embedder)"
            " DO UPDATE SET dim = excluded.dim, vec = excluded.vec, embedding = excluded.embedding",
            (item_id, embedder, dim, vec, values, item_id),
        ).rowcount
        if not stored:
            return False  # deleted while it was being embedded
        self.conn.execute(
            "INSERT INTO vector_log(item_id, embedder, op) VALUES (%s, %s, 'put')", (item_id, embedder)
        )
        self._ensure_hnsw(dim)
        return True

    def _ensure_hnsw(self, dim: int) -> None:
        """The HNSW index (cosine) over the vectors of one dimension, made with its first vector."""
        if dim in self._hnsw or not 0 < dim <= 2_000:  # pgvector indexes up to 2,000 dimensions
            return
        self.conn.execute(
            f"CREATE INDEX IF NOT EXISTS vectors_hnsw_{dim} ON vectors"
            f" USING hnsw ((embedding::vector({dim})) vector_cosine_ops) WHERE dim = {dim}"
        )
        self._hnsw.add(dim)

    # -- audit ----------------------------------------------------------------------------

    def _chain_lock(self) -> None:
        """Held from reading the chain's head to the commit, so several replicas never extend
        the same head (store/sql/audit.py appends)."""
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (AUDIT_LOCK,))
