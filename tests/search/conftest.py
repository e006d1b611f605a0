"""Fixtures for the search-layer tests: real SQLite files in tmp_path, a fixed viewer clock."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memhub.core.models import Viewer
from memhub.store.base import NewItem
from memhub.store.sqlite import SqliteStore

NOW = "2030-01-01T00:00:00.000000Z"

AddItem = Callable[..., int]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memhub.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(db_path)
    yield opened
    opened.close()


@pytest.fixture
def alice() -> Viewer:
    return Viewer(principal="alice", now=NOW)


@pytest.fixture
def bob() -> Viewer:
    return Viewer(principal="bob", now=NOW)


def insert(
    store: SqliteStore,
    body: str,
    *,
    title: str | None = None,
    owner: str = "alice",
    scope: str = "global",
    project_id: int | None = None,
    kind: str = "memory",
) -> int:
    with store.transaction(write=True) as tx:
        row = tx.insert_item(
            NewItem(kind=kind, owner=owner, scope=scope, body=body, title=title, project_id=project_id)
        )
    return row.id


@pytest.fixture
def add_item(store: SqliteStore) -> AddItem:
    """add_item(body, title=None, owner="alice", scope="global", project_id=None, kind="memory") -> id"""

    def add(body: str, **fields: object) -> int:
        return insert(store, body, **fields)  # type: ignore[arg-type]

    return add


@pytest.fixture
def make_project(store: SqliteStore) -> Callable[[str, str], int]:
    """make_project(name, owner) -> project id; the owner is its only member."""

    def make(name: str, owner: str) -> int:
        with store.transaction(write=True) as tx:
            return tx.insert_project(name, None, {}, owner).id

    return make


@pytest.fixture
def delete_item(db_path: Path) -> Callable[[int], None]:
    """Delete an item row through a separate connection (as another process would)."""

    def delete(item_id: int) -> None:
        conn = sqlite3.connect(db_path, isolation_level=None)
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("DELETE FROM items WHERE id = ?", (item_id,))
        finally:
            conn.close()

    return delete
