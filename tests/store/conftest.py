"""Fixtures of the store contract tests: every test runs against the backend under test
(MEMHUB_TEST_BACKEND, tests/store/backends.py), with its content in plain text and encrypted.

A second backend joins through BACKENDS in tests/store/backends.py (its `url` hands out a
fresh, empty database); nothing else in tests/store/ names a backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memhub.store.base import Store
from memhub.store.open import open_store
from tests.store.backends import Backend, selected, skip_unless_sqlite
from tests.store.contract import OpenStore, Seed, TickClock

VARIANTS = [selected().name, f"{selected().name}-encrypted"]  # test ids: [sqlite], [sqlite-encrypted]
CONTENT_KEY = bytes(range(32))  # "-encrypted": item text under AES-GCM (store/crypto.py)


@pytest.fixture(params=VARIANTS)
def encrypted(request: pytest.FixtureRequest) -> bool:
    """Whether the store under test encrypts item text."""
    on = str(request.param).endswith("-encrypted")
    if on:
        skip_unless_sqlite("encryption")
    return on


@pytest.fixture
def backend_url(tmp_path: Path, backend: Backend, encrypted: bool) -> str:
    """The location of a fresh, empty store for the backend under test."""
    return backend.url(tmp_path, "memhub-encrypted.db" if encrypted else "memhub.db")


@pytest.fixture
def backend_keys(encrypted: bool) -> tuple[bytes, ...]:
    """The content keys a store of this backend is opened with (none: text stored as it is)."""
    return (CONTENT_KEY,) if encrypted else ()


@pytest.fixture
def open_more(backend_url: str, backend_keys: tuple[bytes, ...]) -> Iterator[OpenStore]:
    """Opens further `Store` objects on the same database (another process, in effect)."""
    opened: list[Store] = []

    def more() -> Store:
        store = open_store(backend_url, clock=TickClock(), keys=backend_keys)
        opened.append(store)
        return store

    yield more
    for store in opened:
        store.close()


@pytest.fixture
def store(backend_url: str, backend_keys: tuple[bytes, ...]) -> Iterator[Store]:
    opened = open_store(backend_url, clock=TickClock(), keys=backend_keys)
    yield opened
    opened.close()


@pytest.fixture
def seed(store: Store) -> Seed:
    return Seed(store)
