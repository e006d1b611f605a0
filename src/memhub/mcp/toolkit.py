"""Tool specs and the one place that turns failures into MCP error results.

A toolset declares its tools as `ToolSpec`s: name, description, pydantic input and output
models, annotations and an async handler. `build_tools` turns them into the SDK's tools:
the published input schema is the input model's JSON schema, but validation happens here
(not in the SDK) so a bad argument is reported in the toolset's own error vocabulary.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, ValidationError

from memhub.core.errors import ErrorKind, MemhubError
from memhub.core.models import Principal
from memhub.mcp.schema import compact_schema
from memhub.services.runtime import Call, Progress, Runtime

log = logging.getLogger(__name__)

Handler = Callable[[Call, Any], Awaitable[BaseModel]]
ErrorRenderer = Callable[[MemhubError], dict[str, Any]]
IdentityResolver = Callable[[Any], Principal]  # transport request (None on stdio) -> caller
CallObserver = Callable[[str, str, float], None]  # (tool, outcome, seconds): metrics


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    handler: Handler
    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    title: str | None = None
    exclude_none: bool = False  # omit null fields from results (action-style tools)


@dataclass(frozen=True)
class Toolset:
    name: str
    render_error: ErrorRenderer
    tools: Sequence[ToolSpec]


class _RawArguments(ArgModelBase):
    """Lets every argument through the SDK untouched: `invoke` validates with the real model."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return {"arguments": dict(self.__pydantic_extra__ or {})}


_LENGTH_ERRORS = {"too_long", "too_short", "string_too_long", "string_too_short"}


def _length_message(err: Any) -> str:
    """`should have at most 200 characters (it has 201)`: text is measured in characters, lists in
    items (pydantic says "items" for a constrained text type; only the input's type is looked at)."""
    ctx = err.get("ctx") or {}
    text = isinstance(err.get("input"), str)
    bound = "at most" if "long" in err["type"] else "at least"
    count = ctx.get("max_length" if bound == "at most" else "min_length")
    if count is None:
        return str(err["msg"])
    unit = ("character" if text else "item") + ("" if count == 1 else "s")
    actual = len(err["input"]) if text or isinstance(err.get("input"), list | dict) else None
    return f"should have {bound} {count} {unit}" + (f" (it has {actual})" if actual is not None else "")


def validation_message(exc: ValidationError) -> str:
    """`project_id: field required; limit: Input should be less than or equal to 30`.

    Built from locations and pydantic's messages only: the rejected values (which may be
    secrets) are never echoed (a length error looks at the input's type and length only).
    """
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] in _LENGTH_ERRORS:
            parts.append(f"{where}: {_length_message(err)}")
        elif err["type"] == "missing":
            parts.append(f"{where} is required")
        elif err["type"] == "extra_forbidden":
            parts.append(f"{where} is not a parameter of this tool")
        else:
            message = err["msg"].removeprefix("Value error, ")
            parts.append(f"{where}: {message}")
    return "; ".join(parts[:8])


def _result(body: dict[str, Any], *, error: bool) -> CallToolResult:
    text = json.dumps(body, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=body, is_error=error
    )


async def invoke(
    spec: ToolSpec,
    toolset: Toolset,
    runtime: Runtime,
    principal: Principal,
    arguments: Mapping[str, Any],
    observe: CallObserver | None = None,
    progress: Progress | None = None,
) -> CallToolResult:
    """Validate, run, audit. Every failure becomes an `isError` result in the toolset's vocabulary."""
    started = time.perf_counter()
    call = Call(runtime=runtime, principal=principal, tool=spec.name, progress=progress)
    outcome = "ok"
    try:
        try:
            args = spec.input_model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise MemhubError(ErrorKind.INVALID, validation_message(exc)) from None
        output = await spec.handler(call, args)
        result = _result(output.model_dump(mode="json", exclude_none=spec.exclude_none), error=False)
        if not call.audited:
            await call.record("ok")
    except MemhubError as exc:
        body = toolset.render_error(exc)
        outcome = str(body.get("error", {}).get("code", exc.kind))
        result = _result(body, error=True)
    except Exception:  # the one broad handler: a bug must not crash the server or leak details
        incident = uuid.uuid4().hex[:12]
        log.exception("tool %s failed unexpectedly (incident %s)", spec.name, incident)
        body = toolset.render_error(
            MemhubError(ErrorKind.INTERNAL, f"internal error (incident {incident}); see the server log")
        )
        outcome = "internal"
        result = _result(body, error=True)
    if result.is_error and not call.audited:
        try:
            await call.record(outcome)
        except MemhubError:
            log.warning("could not audit failed call to %s", spec.name)
    if observe is not None:
        observe(spec.name, outcome, time.perf_counter() - started)
    return result


def build_tools(
    toolsets: Sequence[Toolset],
    runtime: Runtime,
    identity: IdentityResolver,
    observe: CallObserver | None = None,
) -> list[Tool]:
    tools: list[Tool] = []
    for toolset in toolsets:
        for spec in toolset.tools:
            tools.append(_sdk_tool(spec, toolset, runtime, identity, observe))
    return tools


def _sdk_tool(
    spec: ToolSpec,
    toolset: Toolset,
    runtime: Runtime,
    identity: IdentityResolver,
    observe: CallObserver | None,
) -> Tool:
    async def run(arguments: dict[str, Any], ctx: Context) -> CallToolResult:  # type: ignore[type-arg]
        try:
            principal = identity(ctx.request_context.request)
        except MemhubError as exc:
            return _result(toolset.render_error(exc), error=True)
        return await invoke(spec, toolset, runtime, principal, arguments, observe, ctx.report_progress)

    # The return annotation carries the output model, so the SDK publishes outputSchema.
    run.__annotations__ = {
        "arguments": dict[str, Any],
        "ctx": Context,
        "return": Annotated[CallToolResult, spec.output_model],
    }
    tool = Tool.from_function(
        run,
        name=spec.name,
        title=spec.title,
        description=spec.description,
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )
    tool.parameters = compact_schema(spec.input_model.model_json_schema())
    tool.fn_metadata.arg_model = _RawArguments
    if tool.fn_metadata.output_schema is not None:
        tool.fn_metadata.output_schema = compact_schema(tool.fn_metadata.output_schema)
    return tool


def transactional(fn: Callable[[Any, Principal, Any], BaseModel]) -> Handler:
    """A handler running a service function `fn(tx, actor, args)` in the call's one transaction."""

    async def handler(call: Call, args: Any) -> BaseModel:
        return await call.transact(lambda tx: fn(tx, call.principal, args))

    return handler
