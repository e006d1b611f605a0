"""The narrow contract between hybrid search and whatever finds nearest vectors.

`SearchEngine`, the backfill and the operations (services/ops.py) depend on `VectorSearch`
only; `vector_search_for` is the one factory that picks an implementation for a store. On
SQLite it is the in-process numpy index with its sketch pass (search/vectors.py), which
follows the store's vector change feed. A PostgreSQL store gets the same index for now (its
`vector_log` is the same feed); a pgvector adapter over its HNSW index will take its place here.
Vectors themselves are written by the backfill through the store (`Tx.put_vector`), so the
contract has no add/remove: an implementation learns of changes on `refresh`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy.typing as npt

from memhub.store.base import Store

Allowed = Callable[[list[int]], set[int]]  # the subset of candidate ids the caller may see


@runtime_checkable
class VectorSearch(Protocol):
    """Cosine nearest neighbours over one embedder's vectors."""

    @property
    def embedder_id(self) -> str:
        """The embedder whose vectors this searches (its id names model and dimension)."""
        ...

    def size(self) -> int:
        """How many vectors a search can return now (a gauge; may lag until `refresh`)."""
        ...

    def refresh(self) -> int:
        """Catch up with vectors stored or deleted since the last refresh (by any process);
        returns how many changes were applied. Safe to call from several threads."""
        ...

    def reset(self) -> None:
        """Forget what is known and catch up from scratch on the next refresh (after a restore)."""
        ...

    def search(
        self, query_vec: npt.ArrayLike, k: int, allowed: Allowed | None = None
    ) -> list[tuple[int, float]]:
        """The `k` best (item id, cosine) pairs among the ids `allowed` admits, best first (ties by id)."""
        ...


def vector_search_for(store: Store, embedder_id: str, dim: int) -> VectorSearch:
    """The vector search that suits `store`'s backend."""
    if store.backend in ("sqlite", "postgresql"):  # pgvector's HNSW search: a later step (issue 20)
        from memhub.search.vectors import VectorIndex

        return VectorIndex(store, embedder_id, dim)
    raise ValueError(f"no vector search for the {store.backend} backend")
