"""Issue 18, item 7: `MEMHUB_LOG_LEVEL=DEBUG` never puts a stored text on stderr.

The libraries under the transports (sse_starlette, the MCP SDK, httpx) log whole messages
at DEBUG; memhub keeps them at WARNING whatever its own level is."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client, ClientSession
from mcp.client.sse import sse_client

from tests.helpers import http_server, ok
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio
MARKER = "zq-secret-marker-4711"


async def test_debug_logging_keeps_stored_text_out_of_stderr(tmp_path: Path, backend: Backend) -> None:
    log = tmp_path / "stderr.log"
    with (
        log.open("wb") as stderr,
        http_server(backend.url(tmp_path, "m.db"), env={"MEMHUB_LOG_LEVEL": "DEBUG"}, stderr=stderr) as base,
    ):
        async with Client(f"{base}/mcp") as client:
            await ok(client, "memory", action="store", content=f"http {MARKER}", domain="user")
            found = await ok(client, "memory", action="search", query=MARKER)
            assert found["memories"], found
        async with sse_client(f"{base}/sse") as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await ok(session, "memory", action="store", content=f"sse {MARKER}", domain="user")
            await ok(session, "memory", action="search", query=MARKER)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert " DEBUG memhub" in text or " DEBUG " in text  # the server did log at DEBUG
    assert MARKER not in text, [line for line in text.splitlines() if MARKER in line][:3]
