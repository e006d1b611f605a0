"""Two users on one store: alice (the first user, so admin) and bob (a member)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memhub.auth.identity import Identity
from memhub.cli.container import Container, build_container
from memhub.core.models import Principal
from memhub.mcp.server import build_mcp_server
from tests.conftest import make_settings
from tests.helpers import error, ok


@dataclass
class Pair:
    container: Container
    alice: Client
    bob: Client

    async def a(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await ok(self.alice, tool, **arguments)

    async def b(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await ok(self.bob, tool, **arguments)

    async def a_err(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return {"error": await error(self.alice, tool, arguments)}

    async def b_err(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return {"error": await error(self.bob, tool, arguments)}


@pytest.fixture
def assoc_container(tmp_path: Path) -> Iterator[Container]:
    built = build_container(make_settings(tmp_path, embedder="hash", toolsets=("discussion", "assoc")))
    yield built
    built.close()


@pytest.fixture
async def pair(assoc_container: Container) -> AsyncIterator[Pair]:
    runtime = assoc_container.runtime
    bob = Identity(Principal(id="bob"), require_key=False)
    bob_server = build_mcp_server(runtime, ["assoc", "discussion"], bob)
    async with Client(assoc_container.server) as alice, Client(bob_server) as bob_client:
        yield Pair(assoc_container, alice, bob_client)
