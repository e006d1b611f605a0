"""A SQLite store's shared rate-limit buckets (services/ratelimit.SharedBuckets), kept in a
small file beside the store (`memhub.db.limits`), so that several memhub processes on one
store file spend from one bucket without ever taking the store's own writer lock (a long
write there must not hold up every call's count). WAL, `synchronous = OFF` (a lost bucket
starts full, which is what it would soon be anyway), one autocommit upsert per call
(store/sql/buckets.py). The file is made at the first limited call."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from memhub.core.errors import ErrorKind, MemhubError
from memhub.store.sql import buckets
from memhub.store.sql.dialect import SQLITE
from memhub.store.sqlite.wal import use_wal

SUFFIX = ".limits"
BUSY_TIMEOUT_S = 5.0
_TAKE = buckets.take_sql(SQLITE)
_PEEK = buckets.peek_sql(SQLITE)
_PURGE = buckets.purge_sql(SQLITE)


class BucketFile:
    def __init__(self, store_path: Path) -> None:
        self.path = store_path.with_name(store_path.name + SUFFIX)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_S
            )
            try:
                use_wal(conn, BUSY_TIMEOUT_S)  # two processes' first limited calls may open it together
                conn.execute("PRAGMA synchronous = OFF")
                conn.execute(buckets.CREATE)
            except sqlite3.Error:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _run(self, sql: str, args: tuple[object, ...]) -> tuple[list[sqlite3.Row | tuple[object, ...]], int]:
        with self._lock:
            try:
                cursor = self._connect().execute(sql, args)
                return cursor.fetchall(), cursor.rowcount
            except sqlite3.Error as exc:
                raise MemhubError(ErrorKind.STORAGE, "the rate-limit file is unavailable") from exc

    def take_token(self, key: str, bucket: str, cap: float, rate: float, now: float) -> tuple[float, bool]:
        rows, _ = self._run(_TAKE, (key, bucket, cap - 1.0, now, cap, rate))
        tokens, granted = rows[0]
        return float(tokens), bool(granted)  # type: ignore[arg-type]

    def peek_tokens(self, key: str, bucket: str) -> tuple[float, float] | None:
        rows, _ = self._run(_PEEK, (key, bucket))
        return None if not rows else (float(rows[0][0]), float(rows[0][1]))  # type: ignore[arg-type]

    def purge_buckets(self, before: float) -> int:
        return self._run(_PURGE, (before,))[1]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class BucketsMixin:
    """SqliteStore's side of it: the bucket file, opened at the first limited call."""

    _bucket_file: BucketFile  # made in the store's __init__ (it opens nothing until used)

    def _buckets(self) -> BucketFile:
        return self._bucket_file

    def take_token(self, key: str, bucket: str, cap: float, rate: float, now: float) -> tuple[float, bool]:
        return self._buckets().take_token(key, bucket, cap, rate, now)

    def peek_tokens(self, key: str, bucket: str) -> tuple[float, float] | None:
        return self._buckets().peek_tokens(key, bucket)

    def purge_buckets(self, before: float) -> int:
        return self._buckets().purge_buckets(before)

    def _close_buckets(self) -> None:
        self._bucket_file.close()
