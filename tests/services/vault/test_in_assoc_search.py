"""One store: a vault note's sections are found by the assoc toolset's semantic search, with a
link back to the file and lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from memhub.cli.container import build_container
from tests.conftest import make_settings
from tests.helpers import ok
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio

NOTE = (
    "# Deploys\n\nintro\n\n## Rollback\n\nWe roll back with blue-green switches; the old pool stays warm.\n"
)


async def test_semantic_search_finds_vault_notes(tmp_path: Path, backend: Backend) -> None:
    vault = tmp_path / "vault"
    (vault / "ops").mkdir(parents=True)
    (vault / "ops" / "deploys.md").write_text(NOTE, encoding="utf-8")
    container = build_container(make_settings(tmp_path, backend, vault=vault))
    try:
        async with Client(container.server) as client:
            await ok(client, "vault_ls", relative_dir="ops")  # any vault call syncs the store index
            await ok(client, "memory", action="store", content="lunch is at noon", domain="user")
            found = await ok(client, "search", type="semantic", query="blue-green rollback", threshold=0.0)
            notes = [m for m in found["memories"] if m["id"].startswith("note_")]
            assert notes and notes[0]["metadata"]["vault_path"] == "ops/deploys.md"
            assert notes[0]["metadata"]["lines"][0] >= 5 and notes[0]["category"] == "vault"
            assert "blue-green" in notes[0]["content"]
            memories = await ok(client, "memory", action="search", query="blue-green rollback", threshold=0.0)
            assert not [m for m in memories["memories"] if m["id"].startswith("note_")]  # memories only
    finally:
        container.close()
