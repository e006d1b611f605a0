"""One PostgreSQL transaction: the `Tx` protocol over a pooled connection already inside BEGIN.

The conditions on items come from store/sql/ (the one visibility filter, the `where` builder)
with the POSTGRESQL dialect; the keyword index is store/postgres/text.py. Text is stored as it
is: content encryption is refused when the store opens (store/postgres/database.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from psycopg import Connection
from psycopg.rows import DictRow

from memhub.core.models import Viewer
from memhub.store.base import ItemQuery, ItemRow, Visibility
from memhub.store.postgres import bm25, text, vectors
from memhub.store.postgres.errors import storage_errors
from memhub.store.postgres.maintenance import MaintenanceMixin
from memhub.store.postgres.people import PeopleMixin
from memhub.store.sql import POSTGRESQL, item_where, visible
from memhub.store.sql.audit import AuditMixin
from memhub.store.sql.budget import TEXT_BUDGET, bounded
from memhub.store.sql.claims import ClaimsMixin
from memhub.store.sql.items import ItemsMixin
from memhub.store.sql.pce import PceMixin
from memhub.store.sql.rowmap import item_from_row

AUDIT_LOCK = 0x6D656D6875620002  # pg_advisory_xact_lock key: one audit chain head at a time
placeholders = POSTGRESQL.placeholders


class PostgresTx(ItemsMixin, PeopleMixin, MaintenanceMixin, PceMixin, AuditMixin, ClaimsMixin):
    conn: Connection[DictRow]
    dialect = POSTGRESQL

    def __init__(self, conn: Connection[DictRow], now: str, *, write: bool, hnsw: set[int]) -> None:
        self.conn = conn
        self.now = now
        self.write = write
        self._hnsw = hnsw  # dimensions known to have their HNSW index (shared by the store)

    def failures(self) -> AbstractContextManager[None]:
        return storage_errors()

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        row = self.conn.execute(sql, args).fetchone()
        return None if row is None else next(iter(row.values()))

    # -- items ----------------------------------------------------------------------------

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

    def _unindex(self, item_id: int) -> None:
        self.conn.execute("DELETE FROM items_fts WHERE item_id = %s", (item_id,))

    def _where(self, viewer: Viewer, query: ItemQuery) -> tuple[str, list[Any]]:
        return item_where(viewer, query, POSTGRESQL)

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
        # every term, as FTS5 ranks an OR of them: two words of one stem ("apples apple") are
        # two terms of one tsquery, and count twice on both backends
        found = [t for term in terms if (t := text.term(term))]
        wanted = {t.query: t for t in found}
        queries = [t.query for t in found]
        if not wanted or limit <= 0:
            return []
        counts: dict[str, int] = {}  # exact (the ranking's document frequencies read them)
        reached: dict[str, int] = {}  # counts that stopped at their cap: at least this many
        chosen: dict[str, list[str]] = {}

        def count(expr: str, cap: int | None = None) -> int:
            if expr in counts:
                return counts[expr]
            if cap is not None and reached.get(expr, 0) >= cap:
                return cap  # it stopped at a cap at least this high: "the cap or more"
            n = self._count(expr, cap)
            if cap is None or n < cap:
                counts[expr] = n
            else:
                reached[expr] = n
            return n

        def join(some: Sequence[str]) -> str:
            expr = text.any_of(some)
            chosen[expr] = list(some)
            return expr

        expr, window = bounded(queries, budget, count, join)
        kept = [wanted[q] for q in chosen[expr]]
        hits = self._ranked_visible(viewer, kept, expr, window, count, kinds, project_id, limit)
        # the rare terms found too few for this viewer (fewer terms, not another expression: one
        # tsquery twice is the same expression as once)
        if len(hits) < limit and len(kept) < len(found):
            full = join(queries)
            more = self._ranked_visible(viewer, found, full, budget, count, kinds, project_id, limit)
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

    def _count(self, expr: str, cap: int | None = None) -> int:
        """Rows matching `expr`, counted up to `cap` (the rows past it are not rechecked)."""
        if cap is None:
            return int(self._one("SELECT count(*) FROM items_fts WHERE text @@ %s::tsquery", [expr]))
        sql = "SELECT count(*) FROM (SELECT 1 FROM items_fts WHERE text @@ %s::tsquery LIMIT %s) AS matched"
        return int(self._one(sql, [expr, cap]))

    def _ranked_visible(
        self,
        viewer: Viewer,
        terms: Sequence[bm25.Term],
        expr: str,
        window: int,
        count: Callable[[str], int],
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
    ) -> list[tuple[int, float]]:
        """The best `limit` matches of `expr` the viewer may read, by BM25 (store/postgres/bm25.py)."""
        ranked = bm25.ranked(self.conn, terms, expr, window, count)
        hits: list[tuple[int, float]] = []
        start, fetch = 0, max(2 * limit, 64)  # most candidates are usually visible: widen when not
        while start < len(ranked) and len(hits) < limit:
            chunk = ranked[start : start + fetch]
            passed = self.visible_ids(viewer, [item_id for item_id, _ in chunk], kinds, project_id)
            hits.extend((item_id, score) for item_id, score in chunk if item_id in passed)
            start, fetch = start + fetch, fetch * 4
        return hits[:limit]

    # -- links ----------------------------------------------------------------------------

    def upsert_link(self, src: int, dst: int, type: str, subtype: str | None, strength: float) -> None:
        """One edge per (src, dst, type, subtype) (NULLS NOT DISTINCT); the stronger strength wins."""
        self.conn.execute(
            "INSERT INTO links(src, dst, type, subtype, strength, created_at) VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (src, dst, type, subtype)"
            " DO UPDATE SET strength = greatest(links.strength, excluded.strength)",
            (src, dst, type, subtype, strength, self.now),
        )

    # -- vectors --------------------------------------------------------------------------

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

    def nearest_vectors(
        self, embedder: str, query: Sequence[float], k: int, visible: Visibility | None = None
    ) -> list[tuple[int, float]]:
        """`NearestVectors` in this transaction (a search's snapshot: no second connection)."""
        return vectors.nearest(self.conn, embedder, query, k, visible)

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
