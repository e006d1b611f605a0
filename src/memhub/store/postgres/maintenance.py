"""Maintenance inside a PostgreSQL transaction: rebuild the text index, drop vectors, remove orphans."""

from __future__ import annotations

import json

from psycopg import Connection
from psycopg.rows import DictRow

from memhub.store.postgres import text

BATCH = 2_000
TABLES = ("items", "links", "vectors", "projects", "project_members", "sessions", "principals", "events")


class MaintenanceMixin:
    conn: Connection[DictRow]
    now: str

    def reindex_text(self, batch: int = BATCH) -> int:
        """Rebuild the keyword index from the items (after a tokenizer or normalisation change)."""
        self.conn.execute("DELETE FROM items_fts")
        done = last = 0
        while True:
            rows = self.conn.execute(
                "SELECT id, title, body, tags FROM items WHERE id > %s ORDER BY id LIMIT %s", (last, batch)
            ).fetchall()
            if not rows:
                return done
            # one statement per batch: the index's statistics row (migration 0004) is updated
            # once per statement, and many updates of one row in one transaction grow slower
            self.conn.execute(
                "INSERT INTO items_fts(item_id, text) SELECT * FROM unnest(%s::bigint[], %s::tsvector[])",
                (
                    [r["id"] for r in rows],
                    [text.tsvector(r["title"], r["body"], _tags(r["tags"])) for r in rows],
                ),
            )
            done += len(rows)
            last = rows[-1]["id"]

    def drop_vectors(self, embedder: str | None) -> int:
        """Delete the vectors of one embedder (None: every embedder), logging each for other processes."""
        where, args = ("WHERE embedder = %s", (embedder,)) if embedder else ("", ())
        self.conn.execute(
            "INSERT INTO vector_log(item_id, embedder, op)"
            f" SELECT item_id, embedder, 'del' FROM vectors {where}",
            args,
        )
        return self.conn.execute(f"DELETE FROM vectors {where}", args).rowcount

    def cleanup_orphans(self, keep_embedder: str | None) -> dict[str, int]:
        """Remove what nothing refers to any more; returns counts per kind of orphan."""
        counts = {
            "expired_items": self.conn.execute(
                "DELETE FROM items WHERE expires_at IS NOT NULL AND expires_at <= %s", (self.now,)
            ).rowcount,
            # foreign keys keep links, tags and vectors from outliving their items on PostgreSQL
            "dangling_links": 0,
            "dangling_tags": 0,
            "dangling_vectors": 0,
        }
        stale = 0
        if keep_embedder is not None:
            embedders = [r["embedder"] for r in self.conn.execute("SELECT DISTINCT embedder FROM vectors")]
            stale = sum(self.drop_vectors(e) for e in embedders if e != keep_embedder)
        counts["stale_vectors"] = stale
        return counts

    def table_counts(self) -> dict[str, int]:
        out = {}
        for table in TABLES:
            row = self.conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()
            out[table] = int(row["n"]) if row else 0
        return out


def _tags(stored: str) -> list[str]:
    return [str(tag) for tag in json.loads(stored)]
