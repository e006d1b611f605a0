"""A copy of the sample vault (tests/data/vault) served by a real container to a real MCP client."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memhub.cli.container import Container, build_container
from tests.conftest import make_settings
from tests.helpers import error, ok
from tests.store.backends import Backend

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "vault"
DESIGN = "projects/memhub/設計方針.md"
SUMMARY = "summaries/設計要約.md"


@dataclass
class VaultEnv:
    root: Path
    container: Container
    client: Client

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await ok(self.client, tool, **arguments)

    async def err(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The seed-001 error body {"code", "message"} of a call that must fail."""
        return await error(self.client, tool, arguments)

    async def code(self, tool: str, **arguments: Any) -> str:
        return str((await self.err(tool, **arguments))["code"])


def sample_vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    shutil.copytree(SAMPLE, root)
    return root


@pytest.fixture
async def env(tmp_path: Path, backend: Backend) -> AsyncIterator[VaultEnv]:
    root = sample_vault(tmp_path)
    container = build_container(make_settings(tmp_path, backend, vault=root, toolsets=("vault",)))
    async with Client(container.server) as client:
        yield VaultEnv(root, container, client)
    container.close()
