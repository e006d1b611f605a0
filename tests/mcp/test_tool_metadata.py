"""Tool metadata an agent can use without docs/: titles, a description on every input property,
schemas portable to strict clients, and a size budget for tools/list."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memhub.cli.container import build_container
from memhub.mcp import registry
from tests.conftest import make_settings
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio

# 40,000 characters for the 40 tools of all five seed toolsets: 1,000 per tool served.
BUDGET_PER_TOOL = 40_000 // 40


@pytest.fixture
async def tools(tmp_path: Path, backend: Backend) -> AsyncIterator[list[dict[str, Any]]]:
    container = build_container(make_settings(tmp_path, backend))  # every registered toolset
    async with Client(container.server) as client:
        listed = await client.list_tools()
    container.close()
    yield [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]


def _properties(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property of an input schema, nested objects and array items included."""
    for name, prop in schema.get("properties", {}).items():
        yield f"{path}.{name}", prop
        yield from _properties(prop, f"{path}.{name}")
        if isinstance(prop.get("items"), dict):
            yield from _properties(prop["items"], f"{path}.{name}[]")
    for name, sub in schema.get("$defs", {}).items():
        yield from _properties(sub, f"{path}#{name}")


def _subschemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _subschemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _subschemas(value)


async def test_every_tool_has_a_title_and_every_input_property_a_description(
    tools: list[dict[str, Any]],
) -> None:
    assert len(tools) == sum(len(toolset.tools) for toolset in registry.REGISTRY)
    untitled = [t["name"] for t in tools if not t.get("title")]
    assert not untitled, untitled
    undescribed = [
        path
        for t in tools
        for path, prop in _properties(t["inputSchema"], t["name"])
        if not prop.get("description", "").strip()
    ]
    assert not undescribed, undescribed


async def test_descriptions_do_not_send_agents_to_docs(tools: list[dict[str, Any]]) -> None:
    """An agent cannot read the repository: every description must stand on its own."""
    texts = [t["description"] for t in tools] + [
        node["description"]
        for t in tools
        for node in _subschemas(t["inputSchema"])
        if isinstance(node.get("description"), str)
    ]
    pointers = re.compile(r"docs/|README|\bsee [\w./-]+\.md")  # a note path like notes/a.md is fine
    assert not [text for text in texts if pointers.search(text)]


async def test_schemas_have_no_type_arrays(tools: list[dict[str, Any]]) -> None:
    """Nullable values are `anyOf` branches: strict clients (and the Inspector's --strict) warn
    on `type: [X, "null"]`, and single-`type` dialects cannot map it."""
    arrays = [
        (t["name"], node["type"])
        for t in tools
        for schema in (t["inputSchema"], t.get("outputSchema", {}))
        for node in _subschemas(schema)
        if isinstance(node.get("type"), list)
    ]
    assert not arrays, arrays


async def test_tools_list_fits_its_budget(tools: list[dict[str, Any]]) -> None:
    """The whole tools/list (name, title, description, schemas, annotations) stays within
    1,000 characters a tool on average, as compact JSON."""
    size = len(json.dumps({"tools": tools}, ensure_ascii=False, separators=(",", ":")))
    budget = BUDGET_PER_TOOL * len(tools)
    assert size <= budget, f"tools/list declarations are {size} characters; the budget is {budget}"
