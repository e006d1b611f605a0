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
                # the whole table was written anew: the planner's statistics now, not at
                # autovacuum's next pass (its plans choose between the GIN index and a scan)
                self.conn.execute("ANALYZE items_fts")
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


def _tags(stored: str) -> list[str]:
    return [str(tag) for tag in json.loads(stored)]
