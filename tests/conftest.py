"""Fixtures: real SQLite files, the real composition root, the real MCP client."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memhub.cli.container import Container, build_container
from memhub.core.settings import Settings

pytest_plugins = ["tests.pair"]  # two users on one store (assoc_container, pair), for every folder

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_settings(home: Path, user: str = "alice", project: str = "demo", **extra: object) -> Settings:
    values: dict[str, Any] = {"embedder": "none", **extra}
    return Settings(home=home, user=user, project=project, **values)


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    built = build_container(make_settings(tmp_path, toolsets=("discussion",)))
    yield built
    built.close()


@pytest.fixture(params=["auto", "legacy"])
async def client(request: pytest.FixtureRequest, container: Container) -> AsyncIterator[Client]:
    """The in-memory client, both without JSON-RPC framing ("auto") and with it ("legacy")."""
    async with Client(container.server, mode=request.param) as connected:
        yield connected
