"""The overview's figures: items per kind, domain and project, the embedding queue, store size.

Counting every visible item is a scan of the store, so the figures are cached per principal
for `TTL_S` seconds: a page load reads the cache, and at most one count per principal runs
every `TTL_S` seconds whatever the traffic.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from memhub.core.models import Principal
from memhub.services import access
from memhub.services.runtime import Runtime
from memhub.store.base import FileSize, ItemQuery, Tx

TTL_S = 30.0


@dataclass(frozen=True)
class Counts:
    kinds: dict[str, int]
    domains: dict[str, int]
    projects: list[tuple[int, str, int]]  # (id, name, visible items)
    counted_at: str


@dataclass(frozen=True)
class Engine:
    embedder: str
    ready: bool
    queue: int  # inferences waiting
    backlog: int  # items still without a vector
    vectors: int  # vectors in the in-process index
    store_bytes: int | None


def _count(tx: Tx, principal: Principal) -> Counts:
    viewer = access.viewer(tx, principal)
    every = ItemQuery(limit=1)
    kinds = tx.group_counts(viewer, every, "kind")
    domains = tx.group_counts(viewer, every, "scope")
    per_project = tx.group_counts(viewer, ItemQuery(scopes=("project",), limit=1), "project_id")
    projects = []
    for key, n in per_project.items():
        row = tx.get_project(int(key)) if str(key).isdigit() else None
        if row is not None:
            projects.append((row.id, row.name, n))
    projects.sort(key=lambda p: (-p[2], p[1]))
    return Counts(dict(sorted(kinds.items())), dict(sorted(domains.items())), projects, tx.now)


class OverviewCache:
    def __init__(self, ttl_s: float = TTL_S) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[float, Counts]] = {}

    def counts(self, runtime: Runtime, principal: Principal) -> Counts:
        """Blocking: call from a worker thread."""
        now = time.monotonic()
        with self._lock:
            cached = self._counts.get(principal.id)
        if cached is not None and now - cached[0] < self.ttl_s:
            return cached[1]
        with runtime.store.transaction(write=False) as tx:
            fresh = _count(tx, principal)
        with self._lock:
            self._counts[principal.id] = (now, fresh)
        return fresh


def engine_state(runtime: Runtime) -> Engine:
    embedding, search, backfill = runtime.embedding, runtime.search, runtime.backfill
    vectors = search.vectors if search is not None else None
    store = runtime.store
    return Engine(
        embedder=embedding.id if embedding is not None else "none (text search only)",
        ready=embedding.ready if embedding is not None else False,
        queue=embedding.queue_depth if embedding is not None else 0,
        backlog=backfill.backlog if backfill is not None else 0,
        vectors=len(vectors) if vectors is not None else 0,
        store_bytes=store.file_size() if isinstance(store, FileSize) else None,
    )
