"""A toolset is one declaration: adding one to the registry is all it takes to serve it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from pydantic import BaseModel

from memhub.cli.container import build_container
from memhub.core.errors import CallContext, MemhubError, not_found
from memhub.core.models import Principal
from memhub.mcp import registry
from memhub.mcp.toolkit import ResourceSpec, Toolset, ToolSpec, transactional
from memhub.services.common import StrictInput
from memhub.services.runtime import Runtime
from memhub.store.base import Tx
from tests.conftest import make_settings
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


class EchoInput(StrictInput):
    text: str


class EchoOutput(BaseModel):
    text: str
    projects: int


def echo(tx: Tx, actor: Principal, args: EchoInput) -> EchoOutput:
    if args.text == "missing":
        raise not_found("nothing called missing")
    return EchoOutput(text=args.text, projects=len(tx.list_projects(actor.id, 100)))


def render(error: MemhubError, context: CallContext) -> dict[str, object]:
    return {"problem": error.kind.value, "detail": error.message, "request_id": context.request_id}


async def read_note(runtime: Runtime, caller: Principal, ident: str) -> str:
    return json.dumps({"id": ident, "for": caller.id})


# The whole example toolset: tools, instructions, error vocabulary and a resource.
ECHO = Toolset(
    "echo",
    render,
    (ToolSpec("echo", "Echo text back.", EchoInput, EchoOutput, transactional(echo), read_only=True),),
    instructions="Echo answers with what it was given.",
    resources=[ResourceSpec("echo://note/{id}", "note", "A note by id.", read_note)],
)


async def test_one_registry_entry_serves_a_new_toolset(tmp_path: Path, backend: Backend) -> None:
    available = (*registry.REGISTRY, ECHO)  # the one change a new toolset needs
    container = build_container(make_settings(tmp_path, backend, toolsets=("echo", "discussion")), available)
    try:
        async with Client(container.server) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "echo" in names and "add-project" in names and "memory" not in names
            result = await client.call_tool("echo", {"text": "hi"})
            assert result.structured_content == {"text": "hi", "projects": 0}
            failed = await client.call_tool("echo", {"text": "missing"})
            body = json.loads(failed.content[0].text)
            assert failed.is_error and body["problem"] == "not_found" and len(body["request_id"]) == 32
            read = await client.read_resource("echo://note/7")
            assert json.loads(read.contents[0].text) == {"id": "7", "for": "alice"}
            assert "Echo answers" in (client.instructions or "")
    finally:
        container.close()


async def test_instructions_and_capabilities_follow_what_is_served(tmp_path: Path, backend: Backend) -> None:
    container = build_container(make_settings(tmp_path, backend, toolsets=("assoc",)))
    try:
        async with Client(container.server, mode="legacy") as client:
            instructions = client.instructions or ""
            assert "[assoc]" in instructions and "[discussion]" not in instructions
            capabilities = client.server_capabilities
            assert capabilities.tools is not None
            assert capabilities.prompts is None and capabilities.resources is None
    finally:
        container.close()


def test_unknown_toolsets_are_refused(tmp_path: Path, backend: Backend) -> None:
    with pytest.raises(ValueError, match="unknown toolset"):
        build_container(make_settings(tmp_path, backend, toolsets=("nope",)))
