"""Compact schemas accept and reject exactly what pydantic's schemas do."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from memhub.mcp.schema import compact_schema
from memhub.services.discussion import models as m

NODE = {
    "id": 1,
    "project_id": 1,
    "title": "t",
    "description": None,
    "parent_topic_id": None,
    "created_at": "x",
}
CASES: list[tuple[type[Any], dict[str, Any]]] = [
    (m.AddTopicInput, {"project_id": 1, "title": "t"}),
    (m.AddTopicInput, {"project_id": 1, "title": "t", "description": None, "parent_topic_id": None}),
    (m.AddTopicInput, {"project_id": 0, "title": "t"}),
    (m.AddTopicInput, {"project_id": 1, "title": "t", "description": "x" * 16_001}),
    (m.AddTopicInput, {"project_id": 1, "title": "t", "parent_topic_id": "3"}),
    (m.AddTopicInput, {"project_id": 1}),
    (m.AddTopicInput, {"project_id": 1, "title": "t", "extra": 1}),
    (m.AddProjectInput, {"name": "n", "asana_url": "ftp://x"}),
    (m.AddProjectInput, {"name": "n", "asana_url": None}),
    (
        m.TopicTreeOutput,
        {"tree": {**NODE, "children": [{**NODE, "id": 2, "children": []}]}, "truncated": False},
    ),
    (m.TopicTreeOutput, {"tree": {**NODE, "children": [{**NODE, "id": 2}]}, "truncated": False}),
    (m.LogsOutput, {"logs": [], "next_start_id": None}),
    (m.LogsOutput, {"logs": [{"id": 1, "topic_id": 1, "content": 5, "created_at": "x"}], "next_start_id": 3}),
]


@pytest.mark.parametrize(("model", "instance"), CASES)
def test_compact_schema_is_equivalent(model: type[Any], instance: dict[str, Any]) -> None:
    original = model.model_json_schema()
    compact = compact_schema(original)
    assert jsonschema.Draft202012Validator(original).is_valid(instance) == jsonschema.Draft202012Validator(
        compact
    ).is_valid(instance)


def test_compact_schema_drops_refs_and_titles_but_keeps_recursion() -> None:
    flat = compact_schema(m.LogsOutput.model_json_schema())
    assert "$defs" not in flat and "title" not in str(flat.get("properties", {}).get("logs", {}))
    tree = compact_schema(m.TopicTreeOutput.model_json_schema())
    assert set(tree["$defs"]) == {"TopicNode"}
    assert "title" in tree["$defs"]["TopicNode"]["properties"]  # a property named title survives
