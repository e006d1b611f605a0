"""Maintenance inside a transaction: rebuild the text index, drop vectors, remove orphans."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from memhub.store.crypto import ContentCipher


class MaintenanceMixin:
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

    def drop_vectors(self, embedder: str | None) -> int:
        """Delete the vectors of one embedder (None: every embedder), logging each for other processes."""
        where, args = ("WHERE embedder = ?", (embedder,)) if embedder else ("", ())
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
                "DELETE FROM items WHERE expires_at IS NOT NULL AND expires_at <= ?", (self.now,)
            ).rowcount,
            "dangling_links": self.conn.execute(
                "DELETE FROM links"
                " WHERE src NOT IN (SELECT id FROM items) OR dst NOT IN (SELECT id FROM items)"
            ).rowcount,
            "dangling_tags": self.conn.execute(
                "DELETE FROM item_tags WHERE item_id NOT IN (SELECT id FROM items)"
            ).rowcount,
            "dangling_vectors": self.conn.execute(
                "DELETE FROM vectors WHERE item_id NOT IN (SELECT id FROM items)"
            ).rowcount,
        }
        stale = 0
        if keep_embedder is not None:
            embedders = [r[0] for r in self.conn.execute("SELECT DISTINCT embedder FROM vectors")]
            stale = sum(self.drop_vectors(e) for e in embedders if e != keep_embedder)
        counts["stale_vectors"] = stale
        return counts

    def table_counts(self) -> dict[str, int]:
        tables = (
            "items",
            "links",
            "vectors",
            "projects",
            "project_members",
            "sessions",
            "principals",
            "events",
        )
        return {t: int(self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}


def _tags(raw: str) -> list[str]:
    return [str(t) for t in json.loads(raw)]
