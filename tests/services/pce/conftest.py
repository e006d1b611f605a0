"""pce fixtures: a server with every toolset (hash embedder), alice (admin) and bob, a movable clock."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memhub.auth.identity import Identity
from memhub.cli.container import Container, build_container
from memhub.core.models import Principal, ProjectRole
from memhub.mcp.server import build_mcp_server
from tests.conftest import make_settings
from tests.helpers import error_body
from tests.pair import backfill_running, settled
from tests.store.backends import Backend

AT = "2025-01-31T12:00:00Z"
PROV = {"at": AT, "git": {"commit": "abc1234"}}


class MovableClock:
    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


@dataclass
class Pce:
    container: Container
    alice: Client
    bob: Client
    clock: MovableClock

    async def call(self, client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result.content
        body = result.structured_content
        assert isinstance(body, dict) and json.loads(result.content[0].text) == body
        assert set(body) == {"data", "policy_version", "request_id", "trace_id"}, body
        return body

    async def a(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return (await self.call(self.alice, tool, **arguments))["data"]

    async def b(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return (await self.call(self.bob, tool, **arguments))["data"]

    async def err(self, tool: str, client: Client | None = None, **arguments: Any) -> dict[str, Any]:
        result = await (client or self.alice).call_tool(tool, arguments)
        body = error_body(result)
        assert set(body) == {"error", "request_id", "trace_id", "policy_version"}, body
        assert body["error"]["message"] and body["error"]["details"]["http"] >= 400
        return body["error"]

    async def claim(self, text: str, **extra: Any) -> str:
        args = {"text": text, "provenance": PROV, **extra}
        return str((await self.a("pce.memory.upsert", **args))["id"])

    async def share_with_bob(self) -> None:
        """Make bob an editor of alice's current project "demo"."""

        def work() -> None:
            with self.container.runtime.store.transaction(write=True) as tx:
                project = tx.get_project_by_name("demo")
                assert project is not None
                tx.ensure_principal("bob")
                tx.set_member(project.id, "bob", ProjectRole.EDITOR)

        await self.container.runtime.in_thread(work)

    async def settle(self) -> None:
        await settled(self.container)


def pce_container(tmp_path: Path, backend: Backend, **extra: Any) -> Container:
    settings = make_settings(
        tmp_path, backend, embedder="hash", toolsets=("pce", "assoc", "discussion"), **extra
    )
    return build_container(settings)


@pytest.fixture
def pce_settings() -> dict[str, Any]:
    return {}


@pytest.fixture
def built(tmp_path: Path, backend: Backend, pce_settings: dict[str, Any]) -> Iterator[Container]:
    container = pce_container(tmp_path, backend, **pce_settings)
    yield container
    container.close()


@pytest.fixture
async def pce(built: Container) -> AsyncIterator[Pce]:
    clock = MovableClock()
    built.runtime.clock = clock
    bob = Identity(Principal(id="bob", default_project="demo"), require_key=False)
    bob_server = build_mcp_server(built.runtime, ["pce", "assoc", "discussion"], bob, states=built.states)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(built.run_background)
        await backfill_running(built)
        async with Client(built.server) as alice, Client(bob_server) as bob_client:
            yield Pce(built, alice, bob_client, clock)
        tasks.cancel_scope.cancel()
