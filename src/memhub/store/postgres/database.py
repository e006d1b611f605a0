"""The PostgreSQL store: psycopg 3 over a connection pool, for several memhub replicas on one
database.

Transactions: a read is `REPEATABLE READ READ ONLY` (one snapshot, never waits for a writer);
a write takes a transaction advisory lock on one fixed key first (`WRITER_LOCK`), so write
transactions run one at a time across every replica, as they do on SQLite's file, and the
audit chain (which takes its own lock before reading its head) stays linear. The locks are
released by COMMIT or ROLLBACK, so a replica that dies holds nothing.

Migrations (`migrations/NNNN_*.sql`, versioned in `schema_migrations`) are applied when a store
opens, in one transaction under an advisory lock: replicas starting together apply each once.
Content encryption is refused (docs/security.md): the blind index and SQLite's `mh_plain`
substring search have no PostgreSQL counterpart yet.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import IsolationLevel, sql
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from memhub.core.clock import Clock, SystemClock, isoformat
from memhub.core.errors import ErrorKind, MemhubError
from memhub.store.base import EventRow, VectorChange, Visibility
from memhub.store.postgres.buckets import BucketsMixin
from memhub.store.postgres.errors import storage_errors as _storage_errors
from memhub.store.postgres.tx import PostgresTx

log = logging.getLogger(__name__)

WRITER_LOCK = 0x6D656D6875620001  # pg_advisory_xact_lock key: one write transaction at a time
MIGRATION_LOCK = 0x6D656D6875620000  # one replica applies migrations, the others wait for it
COUNT_COMMIT = (
    "INSERT INTO store_writers(token, commits) VALUES (%s, 1)"
    " ON CONFLICT (token) DO UPDATE SET commits = store_writers.commits + 1"
)
RETIRE_WRITER = (
    "WITH gone AS (DELETE FROM store_writers WHERE token = %s RETURNING commits)"
    " INSERT INTO store_writers(token, commits) SELECT 'retired', commits FROM gone"
    " ON CONFLICT (token) DO UPDATE SET commits = store_writers.commits + excluded.commits"
)
POOL_MAX = 10
CONNECT_TIMEOUT_S = 10.0
SPARE_WAIT_S = 0.001  # read_pair's second connection: taken when free, never waited for
CLOSE_TIMEOUT_S = 2.0
BUSY = "the database is busy (no free connection); retry the call"
ENCRYPTION_REFUSED = (
    "content encryption is not available on PostgreSQL yet: start without an encryption key"
    " (encrypt the database's disk instead), or use a SQLite file"
)


def _migrations() -> list[tuple[int, str, str]]:
    folder = resources.files("memhub.store.postgres") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def redacted(url: str) -> str:
    """`url` without its password (what the store shows as its location)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class PostgresStore(BucketsMixin):
    backend = "postgresql"

    def __init__(
        self, url: str, *, clock: Clock | None = None, keys: Sequence[bytes] = (), pool_max: int = POOL_MAX
    ) -> None:
        if keys:
            raise MemhubError(ErrorKind.UNAVAILABLE, ENCRYPTION_REFUSED)
        self.location = redacted(url)
        self.clock: Clock = clock or SystemClock()
        self.cipher = None
        self._hnsw: set[int] = set()
        self._reading = threading.local()  # .tx: this thread's open read transaction, if any
        self._writer = secrets.token_hex(8)  # this store's row of store_writers (the change probe)
        self._pool: ConnectionPool[psycopg.Connection[DictRow]] = ConnectionPool(
            url,
            min_size=min(2, pool_max),  # a search reads in two (read_pair): both ready for the first
            max_size=pool_max,
            kwargs={"autocommit": True, "row_factory": dict_row},
            open=False,
            name="memhub",
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout:
            self._pool.close()
            raise MemhubError(ErrorKind.STORAGE, "cannot connect to the PostgreSQL database") from None
        try:
            self._migrate()
        except BaseException:
            self._pool.close()
            raise

    # -- schema -------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._pool.connection() as conn, _storage_errors(), conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations"
                " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            applied = {r["version"] for r in conn.execute("SELECT version FROM schema_migrations")}
            for version, name, script in _migrations():
                if version in applied:
                    continue
                log.info("applying migration %s", name)
                conn.execute(script.encode("utf-8"))  # no parameters: several statements at once
                conn.execute(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES (%s, %s, %s)",
                    (version, name, isoformat(self.clock.now())),
                )

    def schema_version(self) -> int:
        return int(self._scalar("SELECT coalesce(max(version), 0) FROM schema_migrations") or 0)

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[PostgresTx]:
        """One transaction on a pooled connection: committed when the block ends, rolled back
        if it raises. A write holds the writer lock until then; a read sees one snapshot. A read
        inside a read of the same thread joins it (one snapshot, and no second connection: with
        every pooled connection held by a search waiting for another, the pool would stall)."""
        held: PostgresTx | None = getattr(self._reading, "tx", None)
        if not write and held is not None:
            yield held
            return
        with self._connection() as conn:
            conn.read_only = not write
            conn.isolation_level = IsolationLevel.READ_COMMITTED if write else IsolationLevel.REPEATABLE_READ
            with _storage_errors(), conn.transaction():
                if write:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
                    conn.execute(COUNT_COMMIT, (self._writer,))
                tx = PostgresTx(conn, isoformat(self.clock.now()), write=write, hnsw=self._hnsw)
                if write:
                    yield tx
                    return
                self._reading.tx = tx
                try:
                    yield tx
                finally:
                    self._reading.tx = None

    @contextmanager
    def read_pair(self) -> Iterator[tuple[PostgresTx, PostgresTx | None]]:
        """`transaction(write=False)` and a second read transaction on another pooled connection
        that imports the first one's snapshot (`pg_export_snapshot`, `SET TRANSACTION
        SNAPSHOT`): `Store.read_pair`. No second (None) inside a read of this thread (that one
        is joined), when no connection is free at once (the pool then grows for the next one,
        up to its size), or when the spare one fails to begin (the first goes on)."""
        joined = getattr(self._reading, "tx", None) is not None
        with self.transaction(write=False) as tx:
            spare = None if joined else self._spare()
            if spare is None:
                yield tx, None
                return
            try:
                # the first transaction's: a failure fails the call (`transaction`: a storage error)
                row = tx.conn.execute("SELECT pg_export_snapshot() AS s").fetchone()
                second = _import_snapshot(spare, str((row or {})["s"]), tx.now, self._hnsw)
                try:
                    yield tx, second
                finally:
                    if second is not None:
                        _end_read(spare)
            finally:
                self._pool.putconn(spare)

    def _spare(self) -> psycopg.Connection[DictRow] | None:
        """A free pooled connection, or None without waiting for one."""
        try:
            return self._pool.getconn(timeout=SPARE_WAIT_S)
        except (PoolTimeout, PoolClosed):
            return None

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[DictRow]]:
        if self._pool.closed:
            raise MemhubError(ErrorKind.STORAGE, "the store is closed")
        try:
            with self._pool.connection(timeout=CONNECT_TIMEOUT_S) as conn:
                yield conn
        except PoolTimeout:
            raise MemhubError(ErrorKind.STORAGE, BUSY) from None

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[DictRow]:
        with self.transaction(write=False) as tx:
            return tx.conn.execute(sql, args).fetchall()

    def _scalar(self, sql: str, args: Sequence[Any] = ()) -> Any:
        rows = self._rows(sql, args)
        return next(iter(rows[0].values())) if rows else None

    # -- change feeds -------------------------------------------------------------------

    def data_version(self) -> int:
        """Changes when another store (another replica) commits: a cheap "anything new?" probe,
        the commits the other writers counted in store_writers; this store's own do not count."""
        others = "SELECT coalesce(sum(commits), 0) FROM store_writers WHERE token <> %s"
        return int(self._scalar(others, (self._writer,)))

    def vector_changes(
        self, embedder: str, after_seq: int, limit: int | None = None
    ) -> tuple[int, list[VectorChange]]:
        """Vector puts and deletes after `after_seq`, the latest per item, and the new high-water
        mark. With `limit`, a page: the next `limit` log entries only (see `Store.vector_changes`)."""
        rows = self._rows(
            "SELECT l.seq, l.item_id, l.op, v.vec FROM ("
            "  SELECT item_id, max(seq) AS seq FROM ("
            "    SELECT seq, item_id FROM vector_log WHERE embedder = %s AND seq > %s"
            "    ORDER BY seq LIMIT %s"
            "  ) page GROUP BY item_id"
            ") last JOIN vector_log l ON l.seq = last.seq"
            " LEFT JOIN vectors v ON v.item_id = l.item_id AND v.embedder = l.embedder"
            " ORDER BY l.seq",
            (embedder, after_seq, limit),
        )
        changes = [
            VectorChange(r["seq"], r["item_id"], bytes(r["vec"]) if r["op"] == "put" and r["vec"] else None)
            for r in rows
        ]
        return (changes[-1].seq if changes else after_seq), changes

    def nearest_vectors(
        self, embedder: str, query: Sequence[float], k: int, visible: Visibility | None = None
    ) -> list[tuple[int, float]]:
        """`NearestVectors`: pgvector's HNSW index, the visibility filter in the query
        (store/postgres/vectors.py)."""
        with self.transaction(write=False) as tx:
            return tx.nearest_vectors(embedder, query, k, visible)

    def vector_deletions(self, embedder: str, after_seq: int) -> tuple[int, list[int]]:
        rows = self._rows(
            "SELECT seq, item_id, op FROM vector_log WHERE embedder = %s AND seq > %s ORDER BY seq",
            (embedder, after_seq),
        )
        high = rows[-1]["seq"] if rows else after_seq
        return high, sorted({r["item_id"] for r in rows if r["op"] == "del"})

    def file_size(self) -> int:
        """Bytes on disk: the database's size as PostgreSQL counts it (tables, indexes, TOAST)."""
        return int(self._scalar("SELECT pg_database_size(current_database())"))

    def iter_events(self) -> Iterator[EventRow]:
        import json

        for r in self._rows("SELECT * FROM events ORDER BY id"):
            yield EventRow(
                r["id"], r["at"], r["principal"], r["tool"], r["outcome"], json.loads(r["detail"]),
                r["prev_hash"], r["hash"],
            )  # fmt: skip

    def close(self) -> None:
        """Fold this store's commit count into the row 'retired' (the other stores' probes
        do not move), then release the connections."""
        try:
            if not self._pool.closed:
                with self._pool.connection(timeout=CLOSE_TIMEOUT_S) as conn:
                    conn.read_only = False
                    with conn.transaction():
                        conn.execute(RETIRE_WRITER, (self._writer,))
        except (psycopg.Error, PoolTimeout):
            log.warning("could not retire this store's change counter (harmless)")
        finally:
            self._pool.close()


def _import_snapshot(
    conn: psycopg.Connection[DictRow], snapshot: str, now: str, hnsw: set[int]
) -> PostgresTx | None:
    """A read-only transaction on `conn` (autocommit: BEGIN by hand) in the exported
    `snapshot`; None (nothing left open) if it cannot begin."""
    try:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        # the first statement of the transaction, as it must be
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot)))
    except psycopg.Error as exc:
        log.info("no second reader for this search: %s", type(exc).__name__)
        _end_read(conn)
        return None
    return PostgresTx(conn, now, write=False, hnsw=hnsw)


def _end_read(conn: psycopg.Connection[DictRow]) -> None:
    """End a read transaction begun by hand; a broken connection is the pool's to replace."""
    try:
        if conn.info.transaction_status != TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
    except psycopg.Error as exc:
        log.info("a second reader's transaction did not end cleanly: %s", type(exc).__name__)
