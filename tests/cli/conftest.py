"""A PostgreSQL server for the CLI tests that need one whatever the backend under test
(`memhub migrate` always writes to PostgreSQL; the per-command checks on PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.store.backends import BACKENDS, Backend


@pytest.fixture(scope="session")
def postgres(backend: Backend) -> Iterator[Backend]:
    """The embedded PostgreSQL 18 + pgvector (a pinned dev dependency: never skipped). When
    the suite runs on it already, the `backend` fixture owns it; otherwise it stops here."""
    server = BACKENDS["postgresql"]
    yield server
    if server is not backend:
        server.close()
