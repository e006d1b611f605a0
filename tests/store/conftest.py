"""Fixtures of the store contract tests: every test runs against each backend in BACKENDS.

A second backend (PostgreSQL) joins by adding its name to BACKENDS and one branch to
`backend_url` that hands out the URL of a fresh, empty database (skipping when none is
configured); nothing else in tests/store/ names a backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memhub.store.base import Store
from memhub.store.open import open_store
from tests.store.contract import OpenStore, Seed, TickClock

BACKENDS = ["sqlite", "sqlite-encrypted"]  # add "postgresql" here, and its branch in backend_url
CONTENT_KEY = bytes(range(32))  # "sqlite-encrypted": item text under AES-GCM (store/crypto.py)


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The location of a fresh, empty store for the backend under test."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memhub.db'}"
    if request.param == "sqlite-encrypted":
        return f"sqlite:///{tmp_path / 'memhub-encrypted.db'}"
    # elif request.param == "postgresql": create a fresh database, or pytest.skip(...) when unset
    raise AssertionError(f"no fixture for backend {request.param!r}")


@pytest.fixture
def backend_keys(backend_url: str) -> tuple[bytes, ...]:
    """The content keys a store of this backend is opened with (none: text stored as it is)."""
    return (CONTENT_KEY,) if backend_url.endswith("-encrypted.db") else ()


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
