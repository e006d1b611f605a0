"""Issue 11 (hardening), in process: strict assoc types, bounded free-form JSON, character lengths,
and every free-text field of every toolset rejecting invalid unicode."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic import BaseModel, ValidationError

from memhub.cli.container import Container, build_container
from memhub.mcp.registry import REGISTRY
from memhub.services.common import JSON_MAX_DEPTH
from tests.conftest import make_settings
from tests.helpers import counts, error, ok
from tests.store.backends import Backend

TOOLSETS = {toolset.name: toolset for toolset in REGISTRY}

pytestmark = pytest.mark.anyio


@pytest.fixture
def both(tmp_path: Path, backend: Backend) -> Iterator[Container]:
    built = build_container(make_settings(tmp_path, backend, toolsets=("discussion", "assoc")))
    yield built
    built.close()


@pytest.fixture
async def cli(both: Container) -> AsyncIterator[Client]:
    async with Client(both.server) as connected:
        yield connected


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


# -- defect 5: string lengths are counted in characters ----------------------------------------


async def test_length_errors_say_characters(cli: Client) -> None:
    body = await error(cli, "project", {"action": "create", "name": "n" * 201})
    assert body["message"] == "name: should have at most 200 characters (it has 201)", body
    body = await error(cli, "add-project", {"name": "n" * 201})
    assert "at most 200 characters" in body["message"], body
    body = await error(cli, "memory", {"action": "store", "domain": "user", "content": "x", "tags": [""]})
    assert "at least 1 character" in body["message"] and "item" not in body["message"], body
    body = await error(
        cli, "memory", {"action": "store", "domain": "user", "content": "x", "tags": ["t"] * 33}
    )
    assert "at most 32 items" in body["message"], body  # a list is still counted in items


# -- defect 4: no silent type coercion in assoc -------------------------------------------------

COERCIONS = [
    ("memory", {"action": "store", "domain": "user", "content": "x", "importance": True}, "importance"),
    ("memory", {"action": "store", "domain": "user", "content": "x", "importance": "0.5"}, "importance"),
    ("memory", {"action": "search", "query": "x", "limit": "5"}, "limit"),
    ("memory", {"action": "search", "query": "x", "limit": 5.0}, "limit"),
    ("memory", {"action": "search", "query": "x", "threshold": True}, "threshold"),
    ("memory", {"action": "get_related", "memory_id": "mem_x", "depth": "2"}, "depth"),
    ("project", {"action": "delete", "project_id": "proj_x", "force": "true"}, "force"),
    ("project", {"action": "delete", "project_id": "proj_x", "force": 1}, "force"),
    ("memory_manage", {"action": "cleanup", "dry_run": "true"}, "dry_run"),
    ("user", {"action": "get_current", "include_stats": 1}, "include_stats"),
    ("search", {"type": "advanced", "filters": {"importance_min": True}}, "filters.importance_min"),
    ("admin", {"action": "health_check", "force": "yes"}, "force"),
    ("memory", {"action": "store", "domain": "user", "content": 5}, "content"),
]


@pytest.mark.parametrize(("tool", "arguments", "field"), COERCIONS)
async def test_assoc_rejects_coercion(
    both: Container, cli: Client, tool: str, arguments: Any, field: str
) -> None:
    before = counts(both.settings.db_url)
    body = await error(cli, tool, arguments)
    assert body["code"] == "invalid_parameter" and body["message"].startswith(field), body
    assert counts(both.settings.db_url) == before


async def test_assoc_still_accepts_natural_json(cli: Client) -> None:
    stored = await ok(cli, "memory", action="store", domain="user", content="ints for floats", importance=1)
    assert stored["memory"]["importance"] == 1.0
    await ok(cli, "memory", action="search", query="ints", limit=5, threshold=0)
    await ok(cli, "search", type="advanced", filters={"domains": ["user"], "importance_min": 0})
    await ok(cli, "user", action="get_current", include_stats=True)
    await ok(cli, "memory_manage", action="cleanup", dry_run=True, cleanup_before="2000-01-01T00:00:00Z")


# -- defect 3: free-form JSON is bounded --------------------------------------------------------


async def test_deep_metadata_is_rejected_and_readers_keep_working(both: Container, cli: Client) -> None:
    before = counts(both.settings.db_url)
    body = await error(
        cli, "memory", {"action": "store", "domain": "user", "content": "deep", "metadata": nested(197)}
    )
    assert body["code"] == "invalid_parameter" and "nested" in body["message"], body
    assert counts(both.settings.db_url) == before
    # at the limit it is stored and every reader answers
    ok_meta = nested(JSON_MAX_DEPTH)
    stored = await ok(cli, "memory", action="store", domain="user", content="deep", metadata=ok_meta)
    got = await ok(cli, "memory", action="get", memory_id=stored["memory"]["id"])
    assert got["memory"]["metadata"] == ok_meta
    await ok(cli, "memory", action="search", query="deep", threshold=0)
    await ok(cli, "search", type="timerange", start_time="2000-01-01T00:00:00Z")
    # update goes through the same type
    body = await error(
        cli, "memory", {"action": "update", "memory_id": stored["memory"]["id"], "metadata": nested(50)}
    )
    assert body["code"] == "invalid_parameter", body


BAD_JSON: list[tuple[str, Any]] = [
    ("nested", nested(JSON_MAX_DEPTH + 1)),
    ("keys", {f"k{i}": i for i in range(300)}),
    ("bytes", {"k": "x" * 70_000}),
    ("invalid unicode", {"k": "a\ud800"}),
    ("invalid unicode", {"a\udcff": 1}),
    ("NUL", {"k": "a\x00"}),
    ("finite", {"k": float("nan")}),
    ("64-bit", {"k": 2**70}),
]


@pytest.mark.parametrize(("word", "value"), BAD_JSON)
async def test_every_free_form_json_parameter_is_bounded(
    both: Container, cli: Client, word: str, value: Any
) -> None:
    calls = [
        ("memory", {"action": "store", "domain": "user", "content": "x", "metadata": value}),
        ("memory", {"action": "update", "memory_id": "mem_x", "metadata": value}),
        (
            "admin",
            {
                "action": "migrate_domain",
                "migration_config": {
                    "source_domain": "user",
                    "target_domain": "global",
                    "filter_criteria": value,
                },
            },
        ),
    ]
    before = counts(both.settings.db_url)
    for tool, arguments in calls:
        if word in ("finite", "invalid unicode", "NUL"):  # the client cannot send these as JSON
            model = TOOLSETS["assoc"].tools[[t.name for t in TOOLSETS["assoc"].tools].index(tool)].input_model
            with pytest.raises(ValidationError) as raised:
                model.model_validate(arguments)
            assert word in str(raised.value)
            continue
        body = await error(cli, tool, arguments)
        assert body["code"] == "invalid_parameter" and word in body["message"], (tool, body)
    assert counts(both.settings.db_url) == before


async def test_import_of_deeply_nested_records_is_rejected(both: Container, cli: Client) -> None:
    import json

    before = counts(both.settings.db_url)
    deep = json.dumps([{"content": "x", "domain": "user", "metadata": nested(100)}])
    body = await error(cli, "memory_manage", {"action": "import", "import_data": deep})
    assert body["code"] == "invalid_parameter" and "nested" in body["message"], body
    very_deep = "[" * 5000 + "]" * 5000  # deeper than Python's json parser can go
    body = await error(cli, "memory_manage", {"action": "import", "import_data": very_deep})
    assert body["code"] == "invalid_parameter" and "nested" in body["message"], body
    assert counts(both.settings.db_url) == before


# -- defect 2 (model side): every free-text field rejects invalid unicode -----------------------

BAD_TEXT = "bad\udcffbytes"  # what `errors="surrogateescape"` makes of the raw bytes b"\xff"


def _bad_values(schema: dict[str, Any], defs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """For one property schema: ('how', value) pairs that smuggle invalid unicode in through it."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    for option in schema.get("anyOf", []):
        yield from _bad_values(option, defs)
    kind = schema.get("type")
    if kind == "string" and "enum" not in schema and "const" not in schema:
        yield "text", ("https://" + BAD_TEXT) if "pattern" in schema else BAD_TEXT
    elif kind == "array":
        for how, value in _bad_values(schema.get("items", {}), defs):
            yield f"[{how}]", [value]
    elif kind == "object" and "properties" in schema:
        for name, prop in schema["properties"].items():
            for how, value in _bad_values(prop, defs):
                yield f"{name}.{how}", {name: value}
    elif kind == "object":
        yield "json value", {"k": BAD_TEXT}
        yield "json key", {BAD_TEXT: 1}


def _models() -> Iterator[tuple[str, type[BaseModel]]]:
    for toolset in TOOLSETS.values():
        for spec in toolset.tools:
            yield spec.name, spec.input_model


@pytest.mark.parametrize(("tool", "model"), list(_models()), ids=[name for name, _ in _models()])
def test_every_text_field_rejects_invalid_unicode(tool: str, model: type[BaseModel]) -> None:
    schema = model.model_json_schema()
    defs = schema.get("$defs", {})
    for name, prop in schema["properties"].items():
        for how, value in _bad_values(prop, defs):
            with pytest.raises(ValidationError) as raised:
                model.model_validate({name: value})
            problems = [e for e in raised.value.errors() if e["loc"] and e["loc"][0] == name]
            assert problems, (tool, name, how)
            # a JSON object whose published schema is opaque (pce entities) may be refused for
            # its shape before its text is looked at: refused either way
            shape = ("json value" in how or "json key" in how) and any(
                e["type"] in ("missing", "extra_forbidden") for e in problems
            )
            assert shape or any("unicode" in e["msg"] for e in problems), (tool, name, how, problems)


@pytest.mark.parametrize(
    ("metadata", "word"),
    [
        ('{"k": "\\ud800"}', "unicode"),
        ('{"k\\u0000": 1}', "NUL"),
        ("{" + ", ".join(f'"k{i}": {i}' for i in range(300)) + "}", "keys"),
        ('{"k": 1e999}', "finite"),
    ],
)
async def test_import_records_metadata_is_bounded_too(
    both: Container, cli: Client, metadata: str, word: str
) -> None:
    before = counts(both.settings.db_url)
    record = '{"content": "x", "domain": "user", "metadata": ' + metadata + "}"
    text = '[{"content": "ok", "domain": "user"}, ' + record + "]"
    body = await error(cli, "memory_manage", {"action": "import", "import_data": text})
    assert body["code"] == "invalid_parameter" and word in body["message"], body
    assert counts(both.settings.db_url) == before
    # and every reader still answers
    await ok(cli, "memory", action="search", query="x", threshold=0)
