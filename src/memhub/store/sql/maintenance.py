"""Maintenance inside a transaction, for every SQL backend: drop vectors, remove orphans, count
the tables. Rebuilding the keyword index (`reindex_text`) is each backend's own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memhub.store.sql.conn import Connection, Cursor
from memhub.store.sql.dialect import Dialect

TABLES = ("items", "links", "vectors", "projects", "project_members", "sessions", "principals", "events")
DANGLING = {  # rows whose item is gone, where no foreign key removed them with it (SQLite)
    "dangling_links": "DELETE FROM links"
    " WHERE src NOT IN (SELECT id FROM items) OR dst NOT IN (SELECT id FROM items)",
    "dangling_tags": "DELETE FROM item_tags WHERE item_id NOT IN (SELECT id FROM items)",
    "dangling_vectors": "DELETE FROM vectors WHERE item_id NOT IN (SELECT id FROM items)",
}


class MaintenanceMixin:
    conn: Connection
    now: str
    dialect: Dialect
    cascades = False  # foreign keys remove an item's links, tags and vectors with it

    def _maintain(self, sql: str, args: Sequence[Any] = ()) -> Cursor:
        """One statement written with `?` placeholders, in this backend's dialect."""
        return self.conn.execute(sql.replace("?", self.dialect.param), args)

    def drop_vectors(self, embedder: str | None) -> int:
        """Delete the vectors of one embedder (None: every embedder), logging each for other processes."""
        where, args = ("WHERE embedder = ?", (embedder,)) if embedder else ("", ())
        self._maintain(
            "INSERT INTO vector_log(item_id, embedder, op)"
            f" SELECT item_id, embedder, 'del' FROM vectors {where}",
            args,
        )
        return self._maintain(f"DELETE FROM vectors {where}", args).rowcount

    def cleanup_orphans(self, keep_embedder: str | None) -> dict[str, int]:
        """Remove what nothing refers to any more; returns counts per kind of orphan."""
        counts = {
            "expired_items": self._maintain(
                "DELETE FROM items WHERE expires_at IS NOT NULL AND expires_at <= ?", (self.now,)
            ).rowcount,
        }
        for kind, sql in DANGLING.items():
            counts[kind] = 0 if self.cascades else self._maintain(sql).rowcount
        stale = 0
        if keep_embedder is not None:
            found = self._maintain("SELECT DISTINCT embedder FROM vectors").fetchall()
            embedders = [r["embedder"] for r in found]
            stale = sum(self.drop_vectors(e) for e in embedders if e != keep_embedder)
        counts["stale_vectors"] = stale
        return counts

    def table_counts(self) -> dict[str, int]:
        counts = {}
        for table in TABLES:
            row = self._maintain(f"SELECT count(*) AS n FROM {table}").fetchone()
            counts[table] = int(row["n"]) if row else 0
        return counts
