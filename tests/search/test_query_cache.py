"""Issue 21 §5: repeated queries are free. Every toolset's search (assoc `memory`, decisions
`search_decisions`, pce `pce.memory.search`) embeds its query through the one
EmbeddingService, whose cache keeps recent query embeddings by (model, text): asked again,
the same query costs no inference. Counted on a real embedder (the hash model) behind the
real MCP client, with the model, index and backfill running as `memhub serve` runs them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from mcp import Client
from tests.conftest import make_settings
from tests.helpers import ok
from tests.pair import backfill_running
from tests.store.backends import Backend

from memhub.cli.container import build_container
from memhub.search.embedders.base import Matrix
from memhub.search.embedders.hashing import HashingEmbedder

pytestmark = pytest.mark.anyio


class CountingEmbedder(HashingEmbedder):
    """The real hash embedder, recording every query text it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        self.queries.extend(texts)
        return super().embed_queries(texts)


async def test_every_toolset_embeds_a_repeated_query_once(tmp_path: Path, backend: Backend) -> None:
    settings = make_settings(tmp_path, backend, embedder="hash", toolsets=("assoc", "decisions", "pce"))
    container = build_container(settings)
    embedding = container.runtime.embedding
    assert embedding is not None
    counting = embedding.embedder = CountingEmbedder()
    searches = {
        "memory": {"action": "search", "query": "kubernetes rollout plan"},
        "search_decisions": {"query": "database choice for the ledger"},
        "pce.memory.search": {"query": "cache invalidation on deploy"},
    }
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(container.run_background)
            async with Client(container.server) as client:
                await backfill_running(container)
                for tool, arguments in searches.items():
                    await ok(client, tool, **arguments)
                    asked = list(counting.queries)
                    assert asked.count(arguments["query"]) == 1, (tool, asked)
                    await ok(client, tool, **arguments)  # the same query again: no inference
                    assert counting.queries == asked, tool
            tasks.cancel_scope.cancel()
    finally:
        container.close()
    assert embedding.cache_hits >= len(searches)
