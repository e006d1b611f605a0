"""What a caller sees of others' records: a project delete is guarded by every record it holds,
and memory(get) lists only associations whose other end the caller may read."""

from __future__ import annotations

import pytest

from tests.pair import Pair

pytestmark = pytest.mark.anyio


async def test_deleting_a_project_counts_every_record_not_what_the_caller_sees(pair: Pair) -> None:
    project = (await pair.b("project", action="create", name="bobs"))["project"]["id"]
    await pair.b("memory", action="store", content="bob's project note", domain="project", project_id=project)
    refused = await pair.a_err("project", action="delete", project_id=project)  # alice: admin, not a member
    assert refused["error"]["code"] == "invalid_parameter" and "force" in refused["error"]["message"]
    assert (await pair.b("memory", action="search", query="project note", threshold=0.0))["memories"]


async def test_get_lists_only_associations_the_caller_may_read(pair: Pair) -> None:
    shared = (await pair.a("memory", action="store", content="a global note", domain="global"))["memory"][
        "id"
    ]
    hidden = await pair.b(
        "memory", action="store", content="bob's private note", domain="user", related_memory_ids=[shared]
    )
    assert hidden["associations"]  # bob sees his link
    seen = await pair.a("memory", action="get", memory_id=shared)
    ends = {x["from_memory_id"] for x in seen.get("associations", [])} | {
        x["to_memory_id"] for x in seen.get("associations", [])
    }
    assert hidden["memory"]["id"] not in ends
