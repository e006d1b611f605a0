"""The composition root: settings in, wired objects out. Nothing else builds services."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import numpy as np
from mcp.server.lowlevel import Server

from memhub.auth.identity import Authenticator, Identity, principal_for_key
from memhub.auth.tokens import JwtVerifier
from memhub.core.memory import limit_heap_arenas
from memhub.core.models import GlobalRole, Principal
from memhub.core.settings import Settings
from memhub.http.guard import GuardPolicy, default_hosts, default_origins
from memhub.http.metrics import Metrics
from memhub.http.sessions import SessionTable
from memhub.mcp import registry
from memhub.mcp.server import build_mcp_server
from memhub.mcp.toolkit import Toolset
from memhub.search import EmbeddingService, SearchEngine, VectorBackfill, make_embedder, vector_search_for
from memhub.search.embedders.factory import twin
from memhub.services.ratelimit import Limit, RateLimiter, SharedBuckets
from memhub.services.runtime import Call, Runtime
from memhub.store.base import FileSize
from memhub.store.crypto import parse_key
from memhub.store.open import open_store

log = logging.getLogger(__name__)


@dataclass
class Container:
    settings: Settings
    runtime: Runtime
    server: Server[Any]
    principal: Principal
    metrics: Metrics
    toolsets: tuple[str, ...]  # the toolsets served
    limiter: RateLimiter  # per principal (the call pipeline's)
    tool_classes: dict[str, str]  # tool name -> rate-limit class, for the HTTP layer
    states: dict[str, object]  # toolset name -> its state (`Toolset.state`)
    sessions: SessionTable | None = None  # open HTTP sessions (built with the guard policy)

    def call(self, toolset: str, principal: Principal, tool: str, **options: Any) -> Call:
        """A call outside MCP (the CLI) with `toolset`'s state, as the pipeline makes them."""
        return Call(self.runtime, principal, tool, state=self.states.get(toolset), **options)

    def gauges(self) -> dict[str, float]:
        """State read at scrape time for /metrics."""
        runtime = self.runtime
        values: dict[str, float] = {"deferred_writes": float(len(runtime.deferred))}
        if isinstance(runtime.store, FileSize):
            values["store_bytes"] = float(runtime.store.file_size())
        if runtime.embedding is not None:
            values["embedder_ready"] = float(runtime.embedding.ready)
            values["embedder_queue_depth"] = float(runtime.embedding.queue_depth)
        if runtime.search is not None and runtime.search.vectors is not None:
            values["vectors_indexed"] = float(runtime.search.vectors.size())
            values["search_vector_timeouts_total"] = float(runtime.search.vector_timeouts)
        if self.sessions is not None:
            values["http_sessions"] = float(len(self.sessions))
        if runtime.backfill is not None:
            values["backfill_embedded_total"] = float(runtime.backfill.embedded)
            values["backfill_backlog"] = float(runtime.backfill.backlog)
        return values

    async def run_background(self) -> None:
        """Load the model and the vector index, then keep giving new items their vectors.

        Process-wide work (one model, one backfill per process), so it runs beside the
        transports rather than in the MCP lifespan, which is entered once per connection."""
        runtime = self.runtime
        if runtime.embedding is None or runtime.search is None or runtime.backfill is None:
            return
        runtime.embedding.start_loading()
        await runtime.search.warm()
        await runtime.backfill.run_forever()

    def principal_for_key(self, key: str) -> Principal | None:
        return principal_for_key(self.runtime.store, key, self.settings.project)

    def authenticator(self) -> Authenticator | None:
        """How HTTP callers prove who they are (None: `auth none`, every caller is the local user)."""
        settings = self.settings
        if settings.auth == "none":
            return None
        verifier = None
        if settings.jwt_secret or settings.jwt_public_key or settings.jwt_jwks:
            verifier = JwtVerifier(
                secret=settings.jwt_secret,
                public_key_file=settings.jwt_public_key,
                jwks_file=settings.jwt_jwks,
                audience=settings.jwt_audience,
                issuer=settings.jwt_issuer,
                claim=settings.jwt_claim,
            )
        return Authenticator(
            self.runtime.store,
            settings.project,
            api_keys=settings.auth == "apikey",
            verifier=verifier,
            local_user=settings.user,
        )

    def guard_policy(self) -> GuardPolicy:
        """The HTTP front door's rules (http/guard.py), from the settings."""
        settings, runtime = self.settings, self.runtime
        hosts = settings.allowed_hosts or default_hosts(settings.host)
        ip_limits = {
            "read": Limit(settings.rate_limit_ip_read),
            "write": Limit(settings.rate_limit_ip_write),
            "admin": Limit(settings.rate_limit_ip_admin),
        }
        ip_limiter = RateLimiter(ip_limits, self.limiter.clock, shared=self.limiter.shared, namespace="ip")
        self.sessions = SessionTable(settings.max_sessions, settings.max_sessions_per_principal)

        def audit(outcome: str, detail: dict[str, Any]) -> None:
            runtime.deferred.event("anonymous", "http.auth", outcome, detail, runtime.now())

        return GuardPolicy(
            allowed_hosts=hosts,
            allowed_origins=settings.allowed_origins or default_origins(hosts),
            allowed_methods=settings.allowed_methods,
            max_body=settings.max_body_bytes,
            authenticate=self.authenticator(),
            audit=audit,
            ip_limiter=ip_limiter,
            principal_limiter=self.limiter,
            tool_classes=self.tool_classes,
            local=self.principal,
            sessions=self.sessions,
        )

    def close(self) -> None:
        self.runtime.close()


def _embedded_hooks(runtime: Runtime, toolsets: Sequence[Toolset]) -> None:
    """Every registered toolset's background hook, whichever toolsets this process serves:
    items written through one toolset and embedded by a process serving another still get
    their toolset's follow-up work (semantic links of memories, say)."""
    hooks = [toolset.on_embedded for toolset in toolsets if toolset.on_embedded is not None]
    if runtime.backfill is None or not hooks:
        return

    async def on_embedded(embedded: list[tuple[int, np.ndarray]]) -> object:
        for hook in hooks:
            await hook(runtime, embedded)
        return None

    runtime.backfill.on_embedded = on_embedded


def encryption_keys(settings: Settings) -> list[bytes]:
    """The content encryption key from the environment or a key file (none: not encrypted)."""
    if settings.encryption_key:
        return [parse_key(settings.encryption_key)]
    if settings.encryption_key_file:
        try:
            text = Path(settings.encryption_key_file).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read the encryption key file: {exc.strerror}") from None
        return [parse_key(text)]
    return []


def build_runtime(
    settings: Settings, available: Sequence[Toolset] = registry.REGISTRY, *, check_store: bool = False
) -> Runtime:
    """`check_store`: refuse a store SQLite reports as damaged (what `serve` asks before serving)."""
    store = open_store(settings.db_url, keys=encryption_keys(settings), check=check_store)
    cache = settings.home / "cache"  # what a model derives from its files, kept between runs
    embedder = make_embedder(settings.embedder, cache_dir=cache)
    embedding = vectors = backfill = None
    if embedder is not None:
        # a backlog is embedded by a second instance of the model, made when needed: searches
        # never wait for indexing (search/embedding.py); e5's and USE's share the loaded model
        name, model = settings.embedder, embedder
        embedding = EmbeddingService(
            model, make_indexer=lambda: twin(model) or make_embedder(name, cache) or model
        )
        vectors = vector_search_for(store, embedding.id, embedding.dim)
        backfill = VectorBackfill(store, embedding, vectors)
    engine = SearchEngine(store, embedding, vectors)
    runtime = Runtime(
        store=store, search=engine, embedding=embedding, backfill=backfill, home=settings.home,
        limiter=anyio.CapacityLimiter(4),
    )  # fmt: skip
    _embedded_hooks(runtime, available)
    return runtime


def build_states(settings: Settings, available: Sequence[Toolset] = registry.REGISTRY) -> dict[str, object]:
    """Each toolset's state, made once per process from the settings (python-sdk's lifespan
    context, one small object per toolset)."""
    return {toolset.name: toolset.state(settings) for toolset in available if toolset.state is not None}


def build_container(
    settings: Settings, available: Sequence[Toolset] = registry.REGISTRY, *, check_store: bool = False
) -> Container:
    limit_heap_arenas()  # before the runtime starts its threads (core/memory.py)
    served = tuple(toolset.name for toolset in registry.select(settings.toolsets, available))
    runtime = build_runtime(settings, available, check_store=check_store)
    states = build_states(settings, available)
    with runtime.store.transaction(write=True) as tx:
        row = tx.ensure_principal(settings.user)
    principal = Principal(
        id=settings.user, role=GlobalRole(row.role), via="mcp", default_project=settings.project
    )
    metrics = Metrics()
    identity = Identity(principal, require_key=settings.auth != "none")
    limits = {
        "read": Limit(settings.rate_limit_read),
        "write": Limit(settings.rate_limit_write),
        "admin": Limit(settings.rate_limit_admin),
    }
    shared = runtime.store if isinstance(runtime.store, SharedBuckets) else None  # one bucket per store
    limiter = RateLimiter(limits, lambda: runtime.clock.now().timestamp(), shared=shared)
    server = build_mcp_server(
        runtime, served, identity, metrics.observe, available=available, limiter=limiter, states=states
    )
    classes = {
        spec.name: spec.limit_class
        for toolset in registry.select(settings.toolsets, available)
        for spec in toolset.tools
    }
    return Container(settings, runtime, server, principal, metrics, served, limiter, classes, states)
