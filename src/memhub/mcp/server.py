"""Compose the MCP server: the chosen toolsets over one Runtime, on the SDK's low-level `Server`.

`tools/list` and `tools/call` (and `resources/*` when a served toolset has resources) are
memhub's own handlers, registered through the SDK's public constructor: the SDK does not
validate or wrap tool calls, so `toolkit.invoke` stays the one place a call is run. Only
the capabilities that are served are advertised (the SDK derives them from the handlers).

The server's lifespan (entered once per connection, or once for all streamable-HTTP
sessions) runs the deferred-write flusher; the first connection starts it and the last one
stops it.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from memhub import __version__
from memhub.core.errors import CallContext, ErrorKind, MemhubError
from memhub.mcp import registry
from memhub.mcp.toolkit import (
    CallObserver,
    IdentityResolver,
    OutputFilter,
    Pipeline,
    ResourceSpec,
    Toolset,
    ToolSpec,
    error_result,
    invoke,
    published_tool,
)
from memhub.services.ratelimit import RateLimiter
from memhub.services.runtime import Runtime

Context = ServerRequestContext[Any]
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for an unknown resource


class _Background:
    """The deferred-write flusher, shared by every connection of one server."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.users = 0
        self.scope: anyio.CancelScope | None = None

    @asynccontextmanager
    async def lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        self.users += 1
        try:
            if self.users > 1:
                yield {}
                return
            async with anyio.create_task_group() as tasks:
                self.scope = tasks.cancel_scope
                tasks.start_soon(self.runtime.deferred.run_forever)
                try:
                    yield {}
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            self.users -= 1


def build_mcp_server(
    runtime: Runtime,
    toolsets: Sequence[str] | None,
    identity: IdentityResolver,
    observe: CallObserver | None = None,
    *,
    output_filters: Sequence[OutputFilter] = (),
    available: Sequence[Toolset] = registry.REGISTRY,
    limiter: RateLimiter | None = None,
    states: Mapping[str, object] | None = None,
) -> Server[Any]:
    """`states`: each toolset's state (`Toolset.state`), made by the composition root."""
    served = registry.select(toolsets, available)
    pipeline = Pipeline(runtime, observe, output_filters, limiter, dict(states or {}))
    tools: dict[str, tuple[ToolSpec[Any, Any], Toolset]] = {}
    for toolset in served:
        for spec in toolset.tools:
            if spec.name in tools:
                raise ValueError(f"tool {spec.name} is declared twice")
            tools[spec.name] = (spec, toolset)

    @functools.cache
    def listing() -> types.ListToolsResult:
        """Made on the first `tools/list` (or the first schema lookup), not before `initialize`:
        the tools' JSON schemas are most of what building the server costs."""
        return types.ListToolsResult(tools=[published_tool(spec) for spec, _ in tools.values()])

    @functools.cache
    def input_schemas() -> dict[str, Any]:
        return {tool.name: tool.input_schema for tool in listing().tools}

    def input_schema(name: str) -> Mapping[str, Any] | None:
        found: Mapping[str, Any] | None = input_schemas().get(name)
        return found

    async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listing()

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        found = tools.get(params.name)
        if found is None:  # the MCP specification: an unknown tool is a protocol error
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        spec, toolset = found
        try:
            principal = identity(ctx.request)
        except MemhubError as exc:
            return error_result(toolset.render_error(exc, CallContext(spec.name, toolset.name, "", "")))
        arguments = params.arguments or {}
        return await invoke(spec, toolset, pipeline, principal, arguments, ctx.session.report_progress)

    resources = [spec for toolset in served for spec in toolset.resources]
    background = _Background(runtime)
    handlers: dict[str, Any] = {}
    if resources:
        handlers.update(_resource_handlers(runtime, identity, resources))
    return Server(
        "memhub",
        version=__version__,
        instructions=registry.instructions(served),
        lifespan=background.lifespan,
        # The SDK checks `Mcp-Param-*` headers of each streamable-HTTP tools/call against the
        # tool's input schema; handing it the schemas spares a tools/list run per call.
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        **handlers,
    )


def _resource_handlers(
    runtime: Runtime, identity: IdentityResolver, resources: Sequence[ResourceSpec]
) -> dict[str, Any]:
    templates = types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template=r.uri_template, name=r.name, description=r.description, mime_type=r.mime_type
            )
            for r in resources
        ]
    )

    async def list_resources(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])  # each resource is named by a template

    async def list_templates(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return templates

    async def read_resource(
        ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        spec = next((r for r in resources if uri.startswith(r.prefix) and uri != r.prefix), None)
        if spec is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown resource: {uri[:200]}")
        try:
            text = await spec.read(runtime, identity(ctx.request), uri.removeprefix(spec.prefix))
        except MemhubError as exc:
            code = RESOURCE_NOT_FOUND if exc.kind is ErrorKind.NOT_FOUND else types.INVALID_PARAMS
            raise MCPError(code, exc.message) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=spec.mime_type, text=text)]
        )

    return {
        "on_list_resources": list_resources,
        "on_list_resource_templates": list_templates,
        "on_read_resource": read_resource,
    }
