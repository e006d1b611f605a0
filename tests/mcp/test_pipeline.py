"""The call pipeline every tool goes through: payload and time limits, rate limits, output filters."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from pydantic import BaseModel

from memhub.auth.identity import Identity
from memhub.cli.container import build_container
from memhub.core.errors import CallContext, MemhubError
from memhub.core.models import Principal
from memhub.mcp.server import build_mcp_server
from memhub.mcp.toolkit import Toolset, ToolSpec
from memhub.services.common import StrictInput
from memhub.services.runtime import Call
from memhub.store.base import NewItem
from tests.conftest import make_settings
from tests.helpers import counts
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


class SlowInput(StrictInput):
    text: str
    seconds: float = 0.0


class SlowOutput(BaseModel):
    id: int


async def slow_write(call: Call, args: SlowInput) -> SlowOutput:
    def work(tx: Any) -> SlowOutput:
        row = tx.insert_item(NewItem(kind="note", owner=call.principal.id, scope="user", body=args.text))
        time.sleep(args.seconds)  # slow work inside the transaction (a worker thread)
        return SlowOutput(id=row.id)

    return await call.transact(work)


async def slow_await(call: Call, args: SlowInput) -> SlowOutput:
    await anyio.sleep(args.seconds)
    return SlowOutput(id=0)


def render(error: MemhubError, context: CallContext) -> dict[str, Any]:
    return {"error": {"code": error.kind.value, "message": error.message, "details": error.details}}


LIMITED = Toolset(
    "limited",
    render,
    [
        ToolSpec(
            "write",
            "Write.",
            SlowInput,
            SlowOutput,
            slow_write,
            read_only=False,
            max_payload=200,
            timeout_s=0.5,
        ),
        ToolSpec("wait", "Wait.", SlowInput, SlowOutput, slow_await, read_only=True, timeout_s=0.2),
    ],
)


async def _error(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error and result.structured_content is None
    body: dict[str, Any] = json.loads(result.content[0].text)["error"]
    return body


async def test_payload_and_time_limits_fail_alone_and_change_nothing(
    tmp_path: Path, backend: Backend
) -> None:
    container = build_container(make_settings(tmp_path, backend, toolsets=("discussion",)))
    server = build_mcp_server(
        container.runtime, ["limited"], Identity(Principal("alice"), require_key=False), available=[LIMITED]
    )
    try:
        async with Client(server) as client:
            before = counts(container.settings.db_url)
            big = await _error(client, "write", {"text": "x" * 500})
            assert big["code"] == "too_large" and "200 bytes" in big["message"]
            late = await _error(client, "write", {"text": "slow", "seconds": 0.8})
            assert late["code"] == "timeout"
            assert (await _error(client, "wait", {"text": "x", "seconds": 5}))["code"] == "timeout"
            assert counts(container.settings.db_url) == before  # the late write was rolled back
            ok = await client.call_tool("write", {"text": "fast"})
            assert not ok.is_error and counts(container.settings.db_url)["items"] == before["items"] + 1
    finally:
        container.close()


async def test_rate_limit_per_principal_and_class(tmp_path: Path, backend: Backend) -> None:
    container = build_container(
        make_settings(tmp_path, backend, toolsets=("discussion",), rate_limit_write=2)
    )
    try:
        async with Client(container.server) as client:
            for name in ("a", "b"):
                assert not (await client.call_tool("add-project", {"name": name})).is_error
            refused = await client.call_tool("add-project", {"name": "c"})
            body = json.loads(refused.content[0].text)["error"]
            assert refused.is_error and "retry after" in body["message"]
            assert not (await client.call_tool("get-projects", {})).is_error  # reads are another class
    finally:
        container.close()


async def test_output_filters_see_every_successful_result(tmp_path: Path, backend: Backend) -> None:
    container = build_container(make_settings(tmp_path, backend, toolsets=("discussion",)))

    def redact(call: Call, body: dict[str, Any]) -> dict[str, Any]:
        return json.loads(json.dumps(body).replace("secret-name", "[redacted]"))

    server = build_mcp_server(
        container.runtime,
        ["discussion"],
        Identity(Principal("alice"), require_key=False),
        output_filters=[redact],
    )
    try:
        async with Client(server) as client:
            made = await client.call_tool("add-project", {"name": "secret-name"})
            assert made.structured_content is not None and made.structured_content["name"] == "[redacted]"
    finally:
        container.close()
