"""A PostgreSQL store filled whole inside one write transaction, for `memhub migrate`
(store/migrate.py): rows copied as they are (COPY), ids kept, the identity sequences moved past
them, vectors stored through the store's own `put_vector` (pgvector column, HNSW index, change
feed), the text index rebuilt. Nothing is committed until the caller's block ends without an
error: a failure half-way leaves the target as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from memhub.core.errors import ErrorKind, MemhubError
from memhub.store.base import EventRow
from memhub.store.postgres.database import PostgresStore
from memhub.store.postgres.tx import PostgresTx


class PostgresTarget:
    def __init__(self, tx: PostgresTx) -> None:
        self.tx = tx

    def count(self, table: str) -> int:
        row = self.tx.conn.execute(
            sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(table))
        ).fetchone()
        return int(row["n"]) if row else 0

    def occupied(self, tables: Sequence[str]) -> list[str]:
        """The tables among `tables` that hold a row."""
        found = []
        for table in tables:
            query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {}) AS x").format(sql.Identifier(table))
            row = self.tx.conn.execute(query).fetchone()
            if row and row["x"]:
                found.append(table)
        return found

    def clear(self, tables: Sequence[str]) -> None:
        """Empty `tables` (TRUNCATE: the audit log's row triggers do not fire), ids restarted."""
        names = sql.SQL(", ").join(sql.Identifier(t) for t in tables)
        with _failing("emptying the target"):
            self.tx.conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(names))

    def write(self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
        """Append `rows` to `table` as they are (vectors: through `put_vector`)."""
        with _failing(f"copying {table}"):
            if table == "vectors":
                at = {name: i for i, name in enumerate(columns)}
                for row in rows:
                    vec = row[at["vec"]]
                    self.tx.put_vector(row[at["item_id"]], row[at["embedder"]], bytes(vec), row[at["dim"]])
                return
            statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
                sql.Identifier(table), sql.SQL(", ").join(sql.Identifier(c) for c in columns)
            )
            with self.tx.conn.cursor().copy(statement) as copy:
                for row in rows:
                    copy.write_row(row)

    def advance_ids(self, table: str, floor: int) -> None:
        """Move `table`'s identity sequence past its highest id and past `floor`, so the next
        row gets a new id."""
        found = self.tx.conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %s AND is_identity = 'YES'",
            (table,),
        ).fetchall()
        for row in found:
            column = sql.Identifier(row["column_name"])
            top = self.tx.conn.execute(
                sql.SQL("SELECT coalesce(max({}), 0) AS top FROM {}").format(column, sql.Identifier(table))
            ).fetchone()
            last = max(floor, int(top["top"]) if top else 0)
            if last > 0:
                self.tx.conn.execute(
                    "SELECT setval(pg_get_serial_sequence(%s, %s), %s)", (table, row["column_name"], last)
                )

    def analyze(self, tables: Sequence[str]) -> None:
        """Fresh planner statistics for `tables` (ANALYZE, inside the copy's transaction: they
        commit with it). Until autovacuum's next pass would take them (up to a minute after the
        commit), the planner would read the empty tables' statistics: at 10k memories it then
        scanned every vector (each one read out of line) rather than walk the HNSW index, ~60 ms
        for the nearest-neighbour query instead of ~6 (docs/benchmarks.md)."""
        names = sql.SQL(", ").join(sql.Identifier(t) for t in tables)
        with _failing("analyzing the copy"):
            self.tx.conn.execute(sql.SQL("ANALYZE {}").format(names))

    def last_hash(self) -> str | None:
        row = self.tx.conn.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
        return str(row["hash"]) if row is not None else None

    def events(self) -> Iterator[EventRow]:
        """The audit log as this transaction sees it, oldest first."""
        for r in self.tx.conn.execute("SELECT * FROM events ORDER BY id"):
            yield EventRow(
                r["id"], r["at"], r["principal"], r["tool"], r["outcome"], json.loads(r["detail"]),
                r["prev_hash"], r["hash"],
            )  # fmt: skip


@contextmanager
def filling(store: PostgresStore) -> Iterator[PostgresTarget]:
    """One write transaction on `store` (holding the writer lock every replica takes):
    committed when the block ends, rolled back if it raises."""
    with store.transaction(write=True) as tx:
        yield PostgresTarget(tx)


@contextmanager
def _failing(doing: str) -> Iterator[None]:
    """A database error named by what was being done and the constraint it broke, never by
    the row's values (they may be stored content)."""
    try:
        yield
    except psycopg.Error as exc:
        constraint = getattr(exc.diag, "constraint_name", None)
        reason = type(exc).__name__ + (f" on {constraint}" if constraint else "")
        raise MemhubError(ErrorKind.STORAGE, f"{doing} failed ({reason}); nothing was written") from None
