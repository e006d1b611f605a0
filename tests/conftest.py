"""Fixtures: real databases (the backend under test), the real composition root, the real MCP client.

`backend` (MEMHUB_TEST_BACKEND, default sqlite; tests/store/backends.py) is where every test
that builds a store, a container or a server gets its store location: `make_settings`
takes it, subprocess tests pass `backend.url(...)` as `--db`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memhub.cli.container import Container, build_container
from memhub.core.settings import Settings
from tests.store.backends import Backend, selected

pytest_plugins = ["tests.pair"]  # two users on one store (assoc_container, pair), for every folder

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a backend other than SQLite (`make test-postgres`), a test that does not take the
    `backend` fixture is skipped: it opens no store of the backend under test (every store
    location comes from `backend`; a test that reaches the backend another way says so with
    `usefixtures("backend")`), so it ran exactly as it would here in the SQLite pass (`make
    test`), which CI runs beside this one."""
    if selected().name == "sqlite":
        return
    skip = pytest.mark.skip(reason="backend-independent: runs in the SQLite pass (make test)")
    for item in items:
        if "backend" not in getattr(item, "fixturenames", ()):
            item.add_marker(skip)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def backend() -> Iterator[Backend]:
    """The database backend the suite runs on (MEMHUB_TEST_BACKEND, default sqlite); what it
    holds for the session (PostgreSQL: its server) is released at the end."""
    chosen = selected()
    yield chosen
    chosen.close()


def make_settings(
    home: Path, backend: Backend, user: str = "alice", project: str = "demo", **extra: object
) -> Settings:
    """Settings of a server whose files are in `home`, its store on `backend`."""
    values: dict[str, Any] = {"embedder": "none", "db": backend.url(home), **extra}
    return Settings(home=home, user=user, project=project, **values)


@pytest.fixture
def container(tmp_path: Path, backend: Backend) -> Iterator[Container]:
    built = build_container(make_settings(tmp_path, backend, toolsets=("discussion",)))
    yield built
    built.close()


@pytest.fixture(params=["auto", "legacy"])
async def client(request: pytest.FixtureRequest, container: Container) -> AsyncIterator[Client]:
    """The in-memory client, both without JSON-RPC framing ("auto") and with it ("legacy")."""
    async with Client(container.server, mode=request.param) as connected:
        yield connected
