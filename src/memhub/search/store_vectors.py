"""The `VectorSearch` of a store that finds nearest neighbours itself (`NearestVectors`:
PostgreSQL with pgvector's HNSW index, store/postgres/vectors.py).

Nothing is held in process: every search reads the database's index, so a vector stored
through any replica is found by the next search through any other (no refresh to wait for).
A `VisibleTo` filter (what `SearchEngine` passes) travels into the query as its rule, so the
index walk itself skips what the viewer may not read; any other `Allowed` callable is applied
to candidates taken best first, 2k at first and widening x4, as the numpy index does.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
import numpy.typing as npt

from memhub.search.vector_search import Allowed, Finish, VisibleTo
from memhub.store.base import NearestVectors, Store


class StoreVectorSearch:
    """`VectorSearch` over the store's own vector index."""

    def __init__(self, store: Store, embedder_id: str, dim: int) -> None:
        if dim < 1:
            raise ValueError("dim must be positive")
        if not isinstance(store, NearestVectors):
            raise ValueError(f"the {store.backend} store does not search vectors itself")
        self.store = store
        self.nearest: NearestVectors = store
        self._embedder_id = embedder_id
        self.dim = dim

    @property
    def embedder_id(self) -> str:
        return self._embedder_id

    def size(self) -> int:
        with self.store.transaction(write=False) as tx:
            return tx.vector_count(self._embedder_id)

    def refresh(self) -> int:
        return 0  # the database's index is always current

    def reset(self) -> None:
        return None

    def search_many(
        self, asks: Sequence[tuple[npt.ArrayLike, Allowed | None]], k: int
    ) -> list[list[tuple[int, float]]]:
        """`search` for each (query, allowed): the database walks its index once for each."""
        return [self.search(query_vec, k, allowed) for query_vec, allowed in asks]

    def prepare(self, query_vec: npt.ArrayLike, k: int) -> Finish:
        """Only the query's check up front (a dimension the index does not hold: ValueError,
        as the in-process index's `prepare` raises it): the database does the search when asked."""
        query = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query has {query.shape[0]} dimensions, the index {self.dim}")
        return partial(self.search, query, k)

    def search(
        self, query_vec: npt.ArrayLike, k: int, allowed: Allowed | None = None
    ) -> list[tuple[int, float]]:
        """The `k` best (item id, cosine) pairs among the ids `allowed` admits, best first (ties by id)."""
        query = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query has {query.shape[0]} dimensions, the index {self.dim}")
        if k <= 0:
            return []
        values = query.tolist()
        if allowed is None or isinstance(allowed, VisibleTo):
            rule = allowed.rule if allowed is not None else None
            held = allowed.tx if allowed is not None else None
            nearest = held if isinstance(held, NearestVectors) else self.nearest  # the caller's snapshot
            return nearest.nearest_vectors(self._embedder_id, values, k, rule)
        hits: list[tuple[int, float]] = []
        offered = 0
        pool = 2 * k
        while True:
            found = self.nearest.nearest_vectors(self._embedder_id, values, pool)
            fresh = found[offered:]
            passed = allowed([item_id for item_id, _ in fresh])
            hits.extend(hit for hit in fresh if hit[0] in passed)
            offered = len(found)
            if len(hits) >= k or len(found) < pool:
                return hits[:k]
            pool *= 4
