"""The composition root: settings in, wired objects out. Nothing else builds services."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import anyio
from mcp.server import MCPServer

from memhub.auth.identity import Identity, principal_for_key
from memhub.core.models import GlobalRole, Principal
from memhub.core.settings import Settings
from memhub.http.metrics import Metrics
from memhub.mcp.server import build_mcp_server
from memhub.search import EmbeddingService, SearchEngine, VectorBackfill, VectorIndex, make_embedder
from memhub.services.assoc.memories import link_semantic
from memhub.services.runtime import Runtime
from memhub.services.vault.state import VaultState
from memhub.store.sqlite import SqliteStore

log = logging.getLogger(__name__)


@dataclass
class Container:
    settings: Settings
    runtime: Runtime
    server: MCPServer
    principal: Principal
    metrics: Metrics

    def gauges(self) -> dict[str, float]:
        """State read at scrape time for /metrics."""
        runtime = self.runtime
        values = {"store_bytes": float(runtime.store.file_size())}
        if runtime.embedding is not None:
            values["embedder_ready"] = float(runtime.embedding.ready)
            values["embedder_queue_depth"] = float(runtime.embedding.queue_depth)
        if runtime.search is not None and runtime.search.vectors is not None:
            values["vectors_indexed"] = float(len(runtime.search.vectors))
            values["search_vector_timeouts_total"] = float(runtime.search.vector_timeouts)
        if runtime.backfill is not None:
            values["backfill_embedded_total"] = float(runtime.backfill.embedded)
            values["backfill_backlog"] = float(runtime.backfill.backlog)
        return values

    async def run_background(self) -> None:
        """Load the model and the vector index, then keep giving new items their vectors."""
        runtime = self.runtime
        if runtime.embedding is None or runtime.search is None or runtime.backfill is None:
            return
        runtime.embedding.start_loading()
        await runtime.search.warm()
        await runtime.backfill.run_forever()

    def principal_for_key(self, key: str) -> Principal | None:
        return principal_for_key(self.runtime.store, key, self.settings.project)

    def close(self) -> None:
        self.runtime.store.close()


def build_runtime(settings: Settings) -> Runtime:
    store = SqliteStore(settings.db_path)
    embedder = make_embedder(settings.embedder)
    embedding = vectors = backfill = None
    if embedder is not None:
        embedding = EmbeddingService(embedder)
        vectors = VectorIndex(store, embedding.id, embedding.dim)
        backfill = VectorBackfill(store, embedding, vectors)
    engine = SearchEngine(store, embedding, vectors)
    runtime = Runtime(
        store=store, search=engine, embedding=embedding, backfill=backfill, home=settings.home,
        limiter=anyio.CapacityLimiter(4),
    )  # fmt: skip
    runtime.vault = settings.vault_path
    runtime.vault_state = VaultState(settings.vault_path, settings.user)
    if backfill is not None:
        # whichever toolsets this process serves, memories it embeds get their semantic links
        backfill.on_embedded = partial(link_semantic, runtime)
    return runtime


def build_container(settings: Settings) -> Container:
    runtime = build_runtime(settings)
    with runtime.store.transaction(write=True) as tx:
        row = tx.ensure_principal(settings.user)
    principal = Principal(
        id=settings.user, role=GlobalRole(row.role), via="mcp", default_project=settings.project
    )
    metrics = Metrics()
    identity = Identity(principal, require_key=settings.auth == "apikey")
    server = build_mcp_server(runtime, settings.toolsets, identity, metrics.observe)
    return Container(settings=settings, runtime=runtime, server=server, principal=principal, metrics=metrics)
