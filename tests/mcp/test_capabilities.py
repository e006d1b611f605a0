"""What memhub advertises is what it serves; unknown names are protocol errors, never tracebacks."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from memhub.cli.container import build_container
from tests.conftest import make_settings
from tests.pair import Pair
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_unknown_tool_prompt_and_resource_are_protocol_errors(
    tmp_path: Path, backend: Backend, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    container = build_container(make_settings(tmp_path, backend))
    try:
        async with Client(container.server, mode=mode) as client:  # type: ignore[arg-type]
            with pytest.raises(MCPError) as tool:
                await client.call_tool("no-such-tool", {})
            assert tool.value.code == -32602 and "Unknown tool" in tool.value.message
            with pytest.raises(MCPError) as prompt:
                await client.get_prompt("no-such-prompt")
            assert prompt.value.code == -32601
            with pytest.raises(MCPError):
                await client.read_resource("memhub://nothing")
    finally:
        container.close()
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]


async def test_health_check_counts_vectors_in_the_store(pair: Pair) -> None:
    project = (await pair.a("project", action="create", name="short-lived"))["project"]["id"]
    for i in range(3):
        await pair.a("memory", action="store", content=f"kept note {i}", domain="user")
    await pair.a("memory", action="store", content="project note", domain="project", project_id=project)
    await pair.counts()  # every vector made
    assert (await pair.a("admin", action="health_check"))["details"]["vectors_indexed"] == 4
    await pair.a("project", action="delete", project_id=project, force=True)
    assert (await pair.a("admin", action="health_check"))["details"]["vectors_indexed"] == 3
