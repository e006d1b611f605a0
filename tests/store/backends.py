"""The database backends the whole suite runs on, and raw access to a store's tables for tests.

`MEMHUB_TEST_BACKEND` picks one (default `sqlite`); the `backend` fixture of tests/conftest.py
hands it to every test that builds a store, a container or a server, which gets its store
location from `Backend.url`. Tests outside tests/store/ never open a database driver: they
read or tamper with tables through `rows`/`execute` here (the layer test checks that only
tests/store/ imports sqlite3).

A backend joins with one entry in BACKENDS (a PostgreSQL one: `url` creates a fresh database
per call, `rows`/`execute` go through psycopg).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol


class RawError(Exception):
    """The database refused a raw statement (a trigger, a constraint)."""


class Backend(Protocol):
    name: str
    text_tables: tuple[str, ...]  # tables of the text index, counted by tests.helpers.counts

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


class SqliteBackend:
    name = "sqlite"
    text_tables = ("items_fts",)

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


BACKENDS: dict[str, Backend] = {
    "sqlite": SqliteBackend(),
    # "postgresql": PostgresBackend(),  <- the one line a second backend adds
}


def selected() -> Backend:
    """The backend named by MEMHUB_TEST_BACKEND (default sqlite)."""
    name = os.environ.get("MEMHUB_TEST_BACKEND", "sqlite")
    if name not in BACKENDS:
        raise ValueError(f"MEMHUB_TEST_BACKEND={name!r}; expected one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def rows(url: str | Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """`Backend.rows` of the backend under test, for helpers that hold only a store's location."""
    return selected().rows(str(url), sql, params)
