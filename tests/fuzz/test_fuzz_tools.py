"""Property-based fuzzing of every listed tool, with arguments generated from its published schema.

Properties of every call: it is answered within CALL_LIMIT_S; a failure is an `isError` result
whose body is `{"error": {"code", "message"}}` with a code of the tool's toolset vocabulary, never
an internal error, never traceback text; a failing call writes no row. The example count is
MEMHUB_FUZZ_EXAMPLES (`make fuzz`: 100,000); CI runs a few hundred.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from memhub.cli.container import Container, build_container
from memhub.core.errors import CallContext, ErrorKind, MemhubError
from memhub.mcp.registry import REGISTRY
from memhub.services.pce import errors as pce_errors
from memhub.services.vault import errors as vault_errors
from tests.conftest import make_settings
from tests.fuzz import strategies as gen
from tests.helpers import counts
from tests.store.backends import Backend

TOOLSETS = {toolset.name: toolset for toolset in REGISTRY}

CALL_LIMIT_S = 10.0


# Errors a toolset gives a code of their own by class rather than by kind.
CLASS_ERRORS = {"pce": tuple(pce_errors.BY_CLASS), "vault": tuple(vault_errors.BY_CLASS)}


def code_and_message(body: dict[str, Any]) -> tuple[str, str]:
    """The error code and message of any toolset's error body: `{"error": {"code", "message"}}`
    (discussion, assoc, vault, pce) or seed 002's `{"status": "error", "message": "Label: ..."}`."""
    if isinstance(body.get("error"), dict):
        assert set(body["error"]) >= {"code", "message"}, body
        return str(body["error"]["code"]), str(body["error"]["message"])
    assert body.get("status") == "error" and isinstance(body.get("message"), str), body
    return body["message"].split(":", 1)[0], body["message"]


def vocabulary(tool: str) -> set[str]:
    """Every code the toolset serving `tool` can answer with (rendered, not hard-coded)."""
    for toolset in TOOLSETS.values():
        if tool in {spec.name for spec in toolset.tools}:
            context = CallContext(tool, toolset.name, "r" * 32, "r" * 32)
            errors = [MemhubError(kind, "x") for kind in ErrorKind]
            errors += [cls("x") for cls in CLASS_ERRORS.get(toolset.name, ())]
            return {code_and_message(toolset.render_error(error, context))[0] for error in errors}
    raise AssertionError(f"{tool} is listed but belongs to no toolset")


@dataclass
class Target:
    container: Container
    portal: BlockingPortal
    client: Client
    tools: dict[str, dict[str, Any]]
    calls: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[Target]:
    home = tmp_path_factory.mktemp("fuzz")
    container = build_container(make_settings(home, backend, toolsets=tuple(TOOLSETS)))
    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(Client(container.server)) as client,
    ):
        listed = portal.call(client.list_tools).tools
        tools = {tool.name: dict(tool.input_schema) for tool in listed}
        t = Target(container, portal, client, tools)
        _seed(t)
        yield t
        print(f"\nfuzz: {t.calls} calls, outcomes {dict(sorted(t.outcomes.items()))}")
    container.close()


def _call(t: Target, tool: str, arguments: dict[str, Any]) -> Any:
    async def run() -> Any:
        with anyio.fail_after(CALL_LIMIT_S):
            return await t.client.call_tool(tool, arguments)

    return t.portal.call(run)


def _seed(t: Target) -> None:
    """Data for the generated ids to hit: a discussion project tree and assoc memories."""
    for tool, arguments in [
        ("add-project", {"name": "fuzz"}),
        ("add-topic", {"project_id": 1, "title": "t"}),
        ("add-topic", {"project_id": 1, "title": "child", "parent_topic_id": 1}),
        ("add-log", {"topic_id": 1, "content": "AI: hi"}),
        ("add-decision", {"topic_id": 2, "decision": "d", "reason": "r"}),
        ("project", {"action": "create", "name": "fuzz-assoc"}),
        ("user", {"action": "create_session", "session_name": "s"}),
        ("memory", {"action": "store", "domain": "user", "content": "seed memory", "tags": ["a"]}),
        ("memory", {"action": "store", "domain": "global", "content": "global seed", "category": "c"}),
    ]:
        if tool not in t.tools:
            continue
        result = _call(t, tool, arguments)
        assert not result.is_error, (tool, result.content)
        body = result.structured_content or {}
        for value in _strings(body):
            if value.startswith(("proj_", "mem_", "sess_")):
                gen.ID_TEXT.append(value)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def check_call(t: Target, tool: str, arguments: dict[str, Any]) -> None:
    db = t.container.settings.db_url
    before = counts(db)
    try:
        result = _call(t, tool, arguments)
    except UnicodeEncodeError:  # the client cannot serialise a lone surrogate in a key: never sent
        t.outcomes["unsendable"] = t.outcomes.get("unsendable", 0) + 1
        assert counts(db) == before
        return
    t.calls += 1
    text = result.content[0].text if result.content else ""
    assert "Traceback" not in text, (tool, arguments, text)
    if not result.is_error:
        t.outcomes["ok"] = t.outcomes.get("ok", 0) + 1
        assert isinstance(result.structured_content, dict), (tool, arguments)
        return
    assert result.structured_content is None, (tool, arguments)  # an error body is text only
    body = json.loads(text)
    code, message = code_and_message(body)
    t.outcomes[code] = t.outcomes.get(code, 0) + 1
    assert code in vocabulary(tool), (tool, arguments, body)
    assert "internal error" not in message, (tool, arguments, body)  # a bug, see the server log
    assert counts(db) == before, (tool, arguments, body)


def test_every_tool_is_fuzzed(target: Target) -> None:
    """Every listed tool has a strategy (the list comes from the client, not from a fixed list)."""
    names = set(target.tools)
    assert names >= {"add-project", "memory", "admin"} and all(
        target.tools[name].get("type") == "object" for name in names
    )


def _calls(t: Target) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    per_tool = [
        gen.object_strategy(schema, schema.get("$defs", {}), name).map(lambda a, n=name: (n, a))
        for name, schema in sorted(t.tools.items())
    ]
    return st.one_of(*per_tool)


def test_fuzz_every_tool(target: Target) -> None:
    @settings(
        max_examples=gen.examples(400),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    @given(call=_calls(target))
    def run(call: tuple[str, dict[str, Any]]) -> None:
        check_call(target, *call)

    run()
    assert target.calls >= min(gen.examples(400), 50)


@pytest.mark.parametrize("depth", [9, 50, 199])  # deeper: the client cannot serialise it (raw stdio tests)
def test_deep_free_form_json_everywhere(target: Target, depth: int) -> None:
    """The schema-free objects (metadata, filter criteria) at the depths that used to hang readers."""
    deep = gen.nested_json(depth)
    check_call(
        target, "memory", {"action": "store", "domain": "user", "content": "x", "metadata": {"d": deep}}
    )
    check_call(
        target,
        "admin",
        {
            "action": "migrate_domain",
            "migration_config": {
                "source_domain": "user",
                "target_domain": "global",
                "filter_criteria": {"d": deep},
            },
        },
    )
    for arguments in (
        {"action": "search", "query": "x", "threshold": 0},
        {"action": "get", "memory_id": "mem_1"},
    ):
        check_call(target, "memory", arguments)
    check_call(target, "search", {"type": "timerange", "start_time": "2000-01-01T00:00:00Z"})
