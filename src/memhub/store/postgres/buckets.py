"""The PostgreSQL store's shared rate-limit buckets (services/ratelimit.SharedBuckets): the
UNLOGGED `rate_buckets` table (migration 0002), one autocommit upsert per limited call on a
pooled connection. It never takes the writer lock: a call is counted while a long write runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import psycopg
from psycopg.rows import DictRow

from memhub.core.errors import ErrorKind, MemhubError
from memhub.store.sql import buckets
from memhub.store.sql.dialect import POSTGRESQL

_TAKE = buckets.take_sql(POSTGRESQL)
_PEEK = buckets.peek_sql(POSTGRESQL)
_PURGE = buckets.purge_sql(POSTGRESQL)


class BucketsMixin:
    def _connection(self) -> AbstractContextManager[psycopg.Connection[DictRow]]:
        raise NotImplementedError

    @contextmanager
    def _autocommit(self) -> Iterator[psycopg.Connection[DictRow]]:
        with self._connection() as conn:
            try:
                yield conn
            except psycopg.Error as exc:
                raise MemhubError(ErrorKind.STORAGE, "the rate-limit table is unavailable") from exc

    def take_token(self, key: str, bucket: str, cap: float, rate: float, now: float) -> tuple[float, bool]:
        with self._autocommit() as conn:
            row = conn.execute(_TAKE, (key, bucket, cap - 1.0, now, cap, rate)).fetchone()
        assert row is not None
        return float(row["tokens"]), bool(row["granted"])

    def peek_tokens(self, key: str, bucket: str) -> tuple[float, float] | None:
        with self._autocommit() as conn:
            row = conn.execute(_PEEK, (key, bucket)).fetchone()
        return None if row is None else (float(row["tokens"]), float(row["at"]))

    def purge_buckets(self, before: float) -> int:
        with self._autocommit() as conn:
            return conn.execute(_PURGE, (before,)).rowcount
