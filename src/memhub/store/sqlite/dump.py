"""A SQLite store read whole, table by table, for `memhub migrate` (store/migrate.py).

Everything is read in one read transaction (one snapshot: what a server commits meanwhile is
not half-copied). Encrypted text is opened with the store's key as it is read: the target
(PostgreSQL) stores text in clear, so a store is decrypted while it is copied. The columns
opened are the item text, the `SEALED` side columns (store/sqlite/sealing.py) and the body
of an active context; a new sealed column joins through `SEALED`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memhub.store.crypto import ContentCipher
from memhub.store.sqlite.database import SqliteStore
from memhub.store.sqlite.sealing import SEALED
from memhub.store.sqlite.tx import SqliteTx

BATCH = 1_000
# (table, column) -> the associated data its ciphertexts were sealed with
OPENED: dict[tuple[str, str], str] = {
    ("items", "title"): "title",
    ("items", "body"): "body",
    ("items", "norm_text"): "norm_text",
    ("pce_active_contexts", "body"): "active_context",
    **{(column.table, column.name): column.aad for column in SEALED},
}


class SqliteSource:
    """One read snapshot of a SQLite store. `tx` answers the Tx protocol on the same snapshot
    (the verification's searches)."""

    def __init__(self, tx: SqliteTx, cipher: ContentCipher | None) -> None:
        self.tx = tx
        self.cipher = cipher

    @property
    def encrypted(self) -> bool:
        return self.cipher is not None

    def count(self, table: str) -> int:
        return int(self.tx.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def batches(
        self, table: str, order: str = "", batch: int = BATCH
    ) -> Iterator[tuple[list[str], list[tuple[Any, ...]]]]:
        """(column names, rows) of `table`, `batch` rows at a time, in `order` (SQL; any
        order when empty), text decrypted."""
        cursor = self.tx.conn.execute(f"SELECT * FROM {table}" + (f" ORDER BY {order}" if order else ""))
        columns = [d[0] for d in cursor.description]
        sealed = [(i, aad) for i, name in enumerate(columns) if (aad := OPENED.get((table, name)))]
        while rows := cursor.fetchmany(batch):
            yield columns, [self._opened(tuple(row), sealed) for row in rows]

    def _opened(self, row: tuple[Any, ...], sealed: Sequence[tuple[int, str]]) -> tuple[Any, ...]:
        if self.cipher is None or not sealed:
            return row
        values = list(row)
        for i, aad in sealed:
            values[i] = self._open(values[i], aad)
        return tuple(values)

    def last_hash(self) -> str | None:
        """The hash of the audit log's last event (None: no event yet)."""
        row = self.tx.conn.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
        return str(row[0]) if row is not None else None

    def samples(self, n: int) -> list[tuple[str, str]]:
        """(owner, title and body in clear) of up to `n` items with text, spread evenly over the ids."""
        ids = [int(r[0]) for r in self.tx.conn.execute("SELECT id FROM items WHERE body != '' ORDER BY id")]
        found = []
        for item_id in ids[:: max(1, len(ids) // max(1, n))][:n]:
            row = self.tx.conn.execute(
                "SELECT owner, title, body FROM items WHERE id = ?", (item_id,)
            ).fetchone()
            title, body = self._open(row[1], "title"), self._open(row[2], "body")
            found.append((str(row[0]), f"{title or ''} {body or ''}"))
        return found

    def _open(self, value: str | None, aad: str) -> str | None:
        return self.cipher.decrypt(value, aad) if self.cipher is not None else value

    def id_floor(self, table: str) -> int:
        """The highest id `table` ever handed out (AUTOINCREMENT remembers deleted ones), so
        the target's ids continue past it: a deleted item's id is never given again."""
        row = self.tx.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        return int(row[0]) if row is not None else 0


@contextmanager
def snapshot(store: SqliteStore) -> Iterator[SqliteSource]:
    """The store read in one read transaction (SQLite errors become MemhubError(STORAGE))."""
    with store.transaction(write=False) as tx:
        yield SqliteSource(tx, store.cipher)
