"""Issue 21 §2: indexing reports its progress. `admin(health_check)` says how many memories
still lack a vector and how fast they are being made; `memhub reindex` (services/ops.reindex)
reports the pending count and the rate as it goes. A real container with the hash model,
whose passages take a real time each (`passage_seconds`), so a backlog exists."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from tests.conftest import make_settings
from tests.helpers import ok
from tests.pair import backfill_running
from tests.store.backends import Backend

from memhub.cli.container import build_container
from memhub.search.embedders.hashing import HashingEmbedder
from memhub.services import ops
from memhub.store.rows import NewItem

pytestmark = pytest.mark.anyio


async def test_health_check_counts_pending_vectors_and_the_rate(tmp_path: Path, backend: Backend) -> None:
    container = build_container(make_settings(tmp_path, backend, embedder="hash", toolsets=("assoc",)))
    embedding = container.runtime.embedding
    assert embedding is not None
    embedding.embedder = HashingEmbedder(passage_seconds=0.002)
    embedding.make_indexer = lambda: HashingEmbedder(passage_seconds=0.002)
    with container.runtime.store.transaction(write=True) as tx:
        for n in range(300):
            tx.insert_item(NewItem(kind="memory", owner="alice", scope="user", body=f"imported memo {n}"))
    try:
        async with anyio.create_task_group() as tasks:
            async with Client(container.server) as client:
                before = (await ok(client, "admin", action="health_check"))["details"]
                assert (
                    before["vectors_pending"] == 300 and before["index_rate"] is None
                )  # nothing embedded yet
                tasks.start_soon(container.run_background)
                await backfill_running(container)
                seen: list[int] = []
                with anyio.fail_after(30):
                    while not seen or seen[-1]:
                        details = (await ok(client, "admin", action="health_check"))["details"]
                        seen.append(details["vectors_pending"])
                        await anyio.sleep(0.02)
                assert details["vectors_indexed"] == 300 and details["index_rate"] > 0
                assert seen == sorted(seen, reverse=True)  # it only goes down
            tasks.cancel_scope.cancel()
    finally:
        container.close()


async def test_reindex_reports_pending_and_the_rate(tmp_path: Path, backend: Backend) -> None:
    container = build_container(make_settings(tmp_path, backend, embedder="hash", toolsets=("assoc",)))
    with container.runtime.store.transaction(write=True) as tx:
        for n in range(150):
            tx.insert_item(NewItem(kind="memory", owner="alice", scope="user", body=f"memo {n}"))
    messages: list[str] = []

    async def report(done: float, total: float | None, message: str | None = None) -> None:
        messages.append(message or "")

    try:
        result = await ops.reindex(container.runtime, report)
    finally:
        container.close()
    assert result["vectors_embedded"] == 150 and result["index_rate"] > 0
    assert messages[-1].startswith("embedded 150 of 150, 0 pending, ") and messages[-1].endswith(
        " memories/s"
    )
    assert any(", 86 pending, " in m for m in messages)  # after the first batch of 64
