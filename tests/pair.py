"""Two users on one store: alice (the first user, so admin) and bob (a member)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memhub.auth.identity import Identity
from memhub.cli.container import Container, build_container
from memhub.core.models import Principal
from memhub.mcp.server import build_mcp_server
from tests.conftest import make_settings
from tests.helpers import counts, error, ok
from tests.store.backends import Backend


@dataclass
class Pair:
    container: Container
    alice: Client
    bob: Client

    async def a(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await ok(self.alice, tool, **arguments)

    async def b(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await ok(self.bob, tool, **arguments)

    async def counts(self) -> dict[str, int]:
        """Row counts of the store once background work (vectors, semantic links) has settled."""
        await settled(self.container)
        return counts(self.container.settings.db_url)

    async def a_err(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return {"error": await error(self.alice, tool, arguments)}

    async def b_err(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return {"error": await error(self.bob, tool, arguments)}


@pytest.fixture
def assoc_container(tmp_path: Path, backend: Backend) -> Iterator[Container]:
    built = build_container(
        make_settings(tmp_path, backend, embedder="hash", toolsets=("discussion", "assoc"))
    )
    yield built
    built.close()


async def backfill_running(container: Container, timeout: float = 20) -> None:
    """Wait until the container's vector backfill follows writes (the model is loaded)."""
    backfill = container.runtime.backfill
    assert backfill is not None
    with anyio.fail_after(timeout):
        while not backfill.running:
            await anyio.sleep(0.01)


async def settled(container: Container) -> None:
    """Wait until every memory written so far has its vector and semantic associations."""
    assert container.runtime.backfill is not None
    assert await container.runtime.backfill.settle(20)


@pytest.fixture
async def pair(assoc_container: Container) -> AsyncIterator[Pair]:
    runtime = assoc_container.runtime
    bob = Identity(Principal(id="bob"), require_key=False)
    bob_server = build_mcp_server(runtime, ["assoc", "discussion"], bob, states=assoc_container.states)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(assoc_container.run_background)  # model, index, backfill: as `serve` runs them
        await backfill_running(assoc_container)
        async with Client(assoc_container.server) as alice, Client(bob_server) as bob_client:
            await ok(bob_client, "user", action="get_current")  # bob's first call registers him
            yield Pair(assoc_container, alice, bob_client)
        tasks.cancel_scope.cancel()
