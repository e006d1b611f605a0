"""Tool declarations and the call pipeline: the one place that turns failures into results.

A toolset declares its tools as `ToolSpec`s: name, description, pydantic input and output
models, annotations, an async handler, and the limits of a call (payload bytes, seconds).
`invoke` runs every call the same way:

    payload limit -> input validation -> handler (under the time limit) -> output filters
    -> result, or the toolset's error body; audited either way

Validation happens here, not in the SDK, so a bad argument is reported in the toolset's own
error vocabulary. Error bodies go in the text content (every client shows it) with
`isError: true`; structured content is only sent when it matches the published output
schema, i.e. on success.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import anyio
import mcp_types as types
from pydantic import BaseModel, ValidationError

from memhub.core.errors import CallContext, ErrorKind, InvalidArguments, MemhubError
from memhub.core.models import Principal
from memhub.core.settings import Settings
from memhub.mcp.schema import compact_schema
from memhub.services.ratelimit import RateLimiter
from memhub.services.runtime import Call, Progress, Runtime
from memhub.store.base import Tx

log = logging.getLogger(__name__)

InT = TypeVar("InT", bound=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel)
Handler = Callable[[Call, InT], Awaitable[OutT]]  # (call, validated input) -> output model
ErrorRenderer = Callable[[MemhubError, CallContext], dict[str, Any]]
OutputFilter = Callable[[Call, dict[str, Any]], dict[str, Any]]  # e.g. redaction before send
IdentityResolver = Callable[[Any], Principal]  # transport request (None on stdio) -> caller
CallObserver = Callable[[str, str, float], None]  # (tool, outcome, seconds): metrics
# Told of each batch of vectors the backfill stores, whichever toolsets this process serves:
# (runtime, [(item id, unit vector)]) -> anything (e.g. link the new memories to neighbours).
EmbeddedHook = Callable[[Runtime, list[tuple[int, Any]]], Awaitable[object]]

StateFactory = Callable[[Settings], object]

DEFAULT_PAYLOAD = 1_048_576  # bytes of JSON arguments a call may carry unless its tool says otherwise
DEFAULT_TIMEOUT = 30.0  # seconds


@dataclass(frozen=True)
class ToolSpec(Generic[InT, OutT]):
    """One tool. Generic over its input and output models, so the type checker rejects a
    handler that takes another input model or returns another output model than the spec
    publishes (tests/mcp/test_typed_specs.py runs mypy on such a spec)."""

    name: str
    description: str
    input_model: type[InT]
    output_model: type[OutT]
    handler: Handler[InT, OutT]
    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    title: str | None = None
    exclude_none: bool = False  # omit null fields from results (action-style tools)
    max_payload: int = DEFAULT_PAYLOAD
    timeout_s: float = DEFAULT_TIMEOUT
    rate_class: str = ""  # "read", "write" or "admin" (services/ratelimit.py); default from read_only

    @property
    def limit_class(self) -> str:
        return self.rate_class or ("read" if self.read_only else "write")


@dataclass(frozen=True)
class Toolset:
    name: str
    render_error: ErrorRenderer
    tools: Sequence[ToolSpec[Any, Any]]
    instructions: str = ""  # what an agent should know about these tools (server instructions)
    output_filter: OutputFilter | None = None  # applied to every successful result of its tools
    resources: Sequence[ResourceSpec] = ()
    on_embedded: EmbeddedHook | None = None  # background work after items get vectors
    # The policy version an error body reports (seed 000's envelope); read only when a call fails.
    policy_version: Callable[[Runtime], Awaitable[str]] | None = None
    # The toolset's own state, made once per process from the settings by the composition root
    # (a small config object, the vault's caches); each of its calls gets it as `Call.state`.
    state: StateFactory | None = None


@dataclass(frozen=True)
class ResourceSpec:
    """A family of readable resources, `uri_template` with one `{id}` at its end."""

    uri_template: str
    name: str
    description: str
    read: Callable[[Runtime, Principal, str], Awaitable[str]]  # (runtime, caller, id) -> text
    mime_type: str = "application/json"

    @property
    def prefix(self) -> str:
        return self.uri_template.removesuffix("{id}")


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


def invalid_arguments(exc: ValidationError) -> InvalidArguments:
    """The INVALID error of a call whose arguments failed validation; it names the parameter
    of the first problem, so a toolset can give it its own code (pce's INVALID_SCOPE)."""
    first = exc.errors(include_url=False)[:1]
    field = None
    if first and first[0]["loc"] and first[0]["type"] not in ("missing", "extra_forbidden"):
        field = str(first[0]["loc"][0])
    return InvalidArguments(validation_message(exc), field=field)


def _payload_size(arguments: Mapping[str, Any]) -> int:
    try:
        return len(
            json.dumps(arguments, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
        )
    except (TypeError, ValueError, RecursionError):
        return math.inf  # type: ignore[return-value]  # not JSON at all: over any limit


async def _rate_limit(pipeline: Pipeline, principal: Principal, spec: ToolSpec[Any, Any]) -> None:
    if pipeline.limiter is None:
        return
    verdict = await pipeline.limiter.take_async(principal.id, spec.limit_class)
    if not verdict.allowed:
        wait = max(1, math.ceil(verdict.retry_after_s))
        raise MemhubError(
            ErrorKind.RATE_LIMITED,
            f"rate limit reached ({verdict.limit} {spec.limit_class} calls per minute); retry after {wait} s",
            retry_after_s=wait,
            limit=verdict.limit,
        )


def _success(body: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(body, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=body, is_error=False
    )


def error_result(body: dict[str, Any]) -> types.CallToolResult:
    """An error every client can read: the body as JSON text, `isError: true`, and no
    structured content (it would not match the tool's output schema, and strict clients
    such as the TypeScript SDK reject a result whose structured content does not)."""
    text = json.dumps(body, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


@dataclass
class Pipeline:
    """What every call of one server passes through, besides its tool."""

    runtime: Runtime
    observe: CallObserver | None = None
    output_filters: Sequence[OutputFilter] = ()
    limiter: RateLimiter | None = None
    states: Mapping[str, object] = field(default_factory=dict)  # toolset name -> its state


async def invoke(
    spec: ToolSpec[Any, Any],
    toolset: Toolset,
    pipeline: Pipeline,
    principal: Principal,
    arguments: Mapping[str, Any],
    progress: Progress | None = None,
    trace_id: str = "",
) -> types.CallToolResult:
    """Validate, run, filter, audit. Every failure becomes an `isError` result in the
    toolset's vocabulary, and a failed call changes nothing."""
    started = time.perf_counter()
    call = Call(
        runtime=pipeline.runtime,
        principal=principal,
        tool=spec.name,
        progress=progress,
        read_only=spec.read_only,
        trace_id=trace_id,
        deadline=time.monotonic() + spec.timeout_s,
        state=pipeline.states.get(toolset.name),
    )
    call.detail["request_id"] = call.request_id
    context = CallContext(spec.name, toolset.name, call.request_id, call.trace_id)
    outcome = "ok"
    try:
        try:
            await _rate_limit(pipeline, principal, spec)
            if _payload_size(arguments) > spec.max_payload:
                raise MemhubError(
                    ErrorKind.TOO_LARGE,
                    f"the arguments are larger than {spec.name}'s limit of {spec.max_payload} bytes",
                )
            try:
                args = spec.input_model.model_validate(dict(arguments))
            except ValidationError as exc:
                raise invalid_arguments(exc) from None
            with anyio.fail_after(spec.timeout_s):
                output = await spec.handler(call, args)
        except TimeoutError:
            raise MemhubError(
                ErrorKind.TIMEOUT, f"{spec.name} took longer than its limit of {spec.timeout_s:g} s"
            ) from None
        body = output.model_dump(mode="json", exclude_none=spec.exclude_none)
        for keep in (*pipeline.output_filters, *([toolset.output_filter] if toolset.output_filter else [])):
            body = keep(call, body)
        result = _success(body)
        if not call.audited:
            await call.record("ok")
    except MemhubError as exc:
        context = await _with_policy_version(toolset, pipeline.runtime, context)
        error = toolset.render_error(exc, context)
        outcome = str(error.get("error", {}).get("code", exc.kind))
        result = error_result(error)
    except Exception:  # the one broad handler: a bug must not crash the server or leak details
        incident = uuid.uuid4().hex[:12]
        log.exception("tool %s failed unexpectedly (incident %s)", spec.name, incident)
        bug = MemhubError(ErrorKind.INTERNAL, f"internal error (incident {incident}); see the server log")
        result = error_result(toolset.render_error(bug, context))
        outcome = "internal"
    if result.is_error and not call.audited:
        await call.record(outcome)
    if pipeline.observe is not None:
        pipeline.observe(spec.name, outcome, time.perf_counter() - started)
    return result


async def _with_policy_version(toolset: Toolset, runtime: Runtime, context: CallContext) -> CallContext:
    if toolset.policy_version is None:
        return context
    try:
        return replace(context, policy_version=await toolset.policy_version(runtime))
    except MemhubError:  # the store is failing too: the body says so without a version
        return context


def published_tool(spec: ToolSpec[Any, Any]) -> types.Tool:
    """The tool as `tools/list` shows it: compact input and output schemas, annotations.

    An output schema that says no more than "an object" is left out (the result is still
    structured content): every character of tools/list costs every agent turn."""
    output = compact_schema(spec.output_model.model_json_schema(mode="serialization"))
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=compact_schema(spec.input_model.model_json_schema()),
        output_schema=None if output == {"type": "object"} else output,
        annotations=tool_hints(spec),
    )


def tool_hints(spec: ToolSpec[Any, Any]) -> types.ToolAnnotations | None:
    """The behaviour hints clients act on. A destructive tool that writes is exactly what the
    MCP defaults say (readOnlyHint false, destructiveHint true), so it publishes none; the
    others state both. Idempotent only when true; no repeated title; no `openWorldHint`
    (memhub's tools touch only its own store). Every character of tools/list costs every
    agent turn."""
    if spec.destructive and not spec.read_only and not spec.idempotent:
        return None
    return types.ToolAnnotations(
        read_only_hint=spec.read_only,
        destructive_hint=spec.destructive and not spec.read_only,
        idempotent_hint=True if spec.idempotent and not spec.read_only else None,
    )


def transactional(fn: Callable[[Tx, Principal, InT], OutT]) -> Handler[InT, OutT]:
    """A handler running a service function `fn(tx, actor, args)` in the call's one
    transaction: a read transaction for a read-only tool, a write transaction otherwise."""

    async def handler(call: Call, args: InT) -> OutT:
        return await call.run(lambda tx: fn(tx, call.principal, args))

    return handler
