"""Maintenance inside a SQLite transaction: rebuilding the FTS index; dropping vectors, removing
orphans and counting tables are store/sql/maintenance.py."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from memhub.store.crypto import ContentCipher
from memhub.store.sql.maintenance import MaintenanceMixin as SqlMaintenance


class MaintenanceMixin(SqlMaintenance):
    conn: sqlite3.Connection
    now: str
    cipher: ContentCipher | None

    index_row: Callable[[str | None, str, Sequence[str]], str]  # SqliteTx's

    def _plain(self, row: sqlite3.Row, column: str) -> str | None:
        value: str | None = row[column]
        return self.cipher.decrypt(value, column) if self.cipher is not None else value

    def reindex_text(self, batch: int = 2_000) -> int:
        """Rebuild the FTS index from the items (after a tokenizer or normalisation change)."""
        self.conn.execute("DELETE FROM items_fts")
        done = 0
        last = 0
        while True:
            rows = self.conn.execute(
                "SELECT id, title, body, tags FROM items WHERE id > ? ORDER BY id LIMIT ?", (last, batch)
            ).fetchall()
            if not rows:
                return done
            self.conn.executemany(
                "INSERT INTO items_fts(rowid, text) VALUES (?, ?)",
                [
                    (
                        r["id"],
                        self.index_row(
                            self._plain(r, "title"),
                            self._plain(r, "body") or "",
                            _tags(self._plain(r, "tags") or "[]"),
                        ),
                    )
                    for r in rows
                ],
            )
            done += len(rows)
            last = rows[-1]["id"]


def _tags(raw: str) -> list[str]:
    return [str(t) for t in json.loads(raw)]
