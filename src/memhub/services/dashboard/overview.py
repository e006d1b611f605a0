"""The overview's figures: items per kind, domain and project, the embedding queue, store size.

The figures are one grouped count of what the principal may see (`Tx.visible_counts`, read
from an index holding every column the visibility filter reads: ~35 ms at 100k items). They
are still cached per principal: a page load reads the cache; a figure older than `TTL_S`
seconds is answered while one background thread counts again, so at most one count per
principal runs at a time whatever the traffic.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass

from memhub.core.models import Principal
from memhub.services import access
from memhub.services.runtime import Runtime
from memhub.store.base import FileSize, Tx

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
    """Every figure from one grouped count of what `principal` may see (an indexed read)."""
    viewer = access.viewer(tx, principal)
    kinds: Counter[str] = Counter()
    domains: Counter[str] = Counter()
    per_project: Counter[int] = Counter()
    for kind, scope, project_id, n in tx.visible_counts(viewer):
        kinds[kind] += n
        domains[scope] += n
        if scope == "project" and project_id is not None:
            per_project[project_id] += n
    projects = []
    for pid, n in per_project.items():
        row = tx.get_project(pid)
        if row is not None:
            projects.append((row.id, row.name, n))
    projects.sort(key=lambda p: (-p[2], p[1]))
    return Counts(dict(sorted(kinds.items())), dict(sorted(domains.items())), projects, tx.now)


class OverviewCache:
    def __init__(self, ttl_s: float = TTL_S) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[float, Counts]] = {}
        self._refreshing: set[str] = set()

    def counts(self, runtime: Runtime, principal: Principal) -> Counts:
        """Blocking: call from a worker thread. A figure older than `ttl_s` is answered at once
        while one background thread counts again (only the first load of a principal waits)."""
        now = time.monotonic()
        with self._lock:
            cached = self._counts.get(principal.id)
            stale = cached is not None and now - cached[0] >= self.ttl_s
            if stale and principal.id not in self._refreshing:
                self._refreshing.add(principal.id)
                threading.Thread(target=self._refresh, args=(runtime, principal), daemon=True).start()
        if cached is not None:
            return cached[1]
        return self._refresh(runtime, principal)

    def _refresh(self, runtime: Runtime, principal: Principal) -> Counts:
        try:
            with runtime.store.transaction(write=False) as tx:
                fresh = _count(tx, principal)
            with self._lock:
                self._counts[principal.id] = (time.monotonic(), fresh)
            return fresh
        finally:
            with self._lock:
                self._refreshing.discard(principal.id)


def engine_state(runtime: Runtime) -> Engine:
    embedding, search, backfill = runtime.embedding, runtime.search, runtime.backfill
    vectors = search.vectors if search is not None else None
    store = runtime.store
    return Engine(
        embedder=embedding.id if embedding is not None else "none (text search only)",
        ready=embedding.ready if embedding is not None else False,
        queue=embedding.queue_depth if embedding is not None else 0,
        backlog=backfill.backlog if backfill is not None else 0,
        vectors=vectors.size() if vectors is not None else 0,
        store_bytes=store.file_size() if isinstance(store, FileSize) else None,
    )
