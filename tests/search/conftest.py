"""Fixtures for the search-layer tests: a real store of the backend under test, a fixed viewer clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.store.backends import Backend

from memhub.core.models import Viewer
from memhub.store.base import NewItem, Store
from memhub.store.open import open_store

NOW = "2030-01-01T00:00:00.000000Z"

AddItem = Callable[..., int]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_url(tmp_path: Path, backend: Backend) -> str:
    return backend.url(tmp_path)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    yield opened
    opened.close()


@pytest.fixture
def alice() -> Viewer:
    return Viewer(principal="alice", now=NOW)


@pytest.fixture
def bob() -> Viewer:
    return Viewer(principal="bob", now=NOW)


def insert(
    store: Store,
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
def add_item(store: Store) -> AddItem:
    """add_item(body, title=None, owner="alice", scope="global", project_id=None, kind="memory") -> id"""

    def add(body: str, **fields: object) -> int:
        return insert(store, body, **fields)  # type: ignore[arg-type]

    return add


@pytest.fixture
def make_project(store: Store) -> Callable[[str, str], int]:
    """make_project(name, owner) -> project id; the owner is its only member."""

    def make(name: str, owner: str) -> int:
        with store.transaction(write=True) as tx:
            return tx.insert_project(name, None, {}, owner).id

    return make


@pytest.fixture
def delete_item(db_url: str) -> Callable[[int], None]:
    """Delete an item row through a separate store (as another process would)."""

    def delete(item_id: int) -> None:
        other = open_store(db_url)
        try:
            with other.transaction(write=True) as tx:
                tx.delete_items([item_id])
        finally:
            other.close()

    return delete
