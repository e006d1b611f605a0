"""Defects a review of the merged toolsets found, each pinned by a test."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from memhub.cli.container import build_container
from memhub.core.errors import MemhubError
from memhub.store.open import open_store
from memhub.store.rows import NewItem
from tests.conftest import make_settings
from tests.mcp.conftest import Pair
from tests.store.backends import Backend

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


def test_a_key_for_a_store_that_holds_plaintext_is_refused(tmp_path: Path, backend: Backend) -> None:
    store = open_store(backend.url(tmp_path, "memhub.db"))
    with store.transaction(write=True) as tx:
        tx.insert_item(NewItem(kind="memory", owner="alice", scope="user", body="kubernetes rollout plan"))
    store.close()
    key = base64.b64encode(os.urandom(32)).decode()
    with pytest.raises(MemhubError, match="encryption rotate"):
        build_container(make_settings(tmp_path, backend, embedder="none", encryption_key=key))
