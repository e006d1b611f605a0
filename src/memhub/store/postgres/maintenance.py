"""Maintenance inside a PostgreSQL transaction: rebuilding the keyword index; dropping vectors,
removing orphans and counting tables are store/sql/maintenance.py."""

from __future__ import annotations

import json

from psycopg import Connection
from psycopg.rows import DictRow

from memhub.store.postgres import text
from memhub.store.sql.maintenance import MaintenanceMixin as SqlMaintenance

BATCH = 2_000


class MaintenanceMixin(SqlMaintenance):
    conn: Connection[DictRow]
    cascades = True  # foreign keys remove an item's links, tags and vectors with it

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
            self.conn.cursor().executemany(
                "INSERT INTO items_fts(item_id, text) VALUES (%s, %s::tsvector)",
                [
                    (r["id"], text.tsvector(r["title"], r["body"], [str(t) for t in json.loads(r["tags"])]))
                    for r in rows
                ],
            )
            done += len(rows)
            last = rows[-1]["id"]
