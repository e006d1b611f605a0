"""The narrow contract between hybrid search and whatever finds nearest vectors.

`SearchEngine`, the backfill and the operations (services/ops.py) depend on `VectorSearch`
only; `vector_search_for` is the one factory that picks an implementation for a store. On
SQLite it is the in-process numpy index with its sketch pass (search/vectors.py), which
follows the store's vector change feed. On a store that finds nearest neighbours itself
(`NearestVectors`: PostgreSQL, pgvector's HNSW index) it is `StoreVectorSearch`
(search/store_vectors.py), which holds nothing in process, so no replica searches a stale copy.
Vectors themselves are written by the backfill through the store (`Tx.put_vector`), so the
contract has no add/remove: an implementation learns of changes on `refresh`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy.typing as npt

from memhub.store.base import NearestVectors, Store, Tx, Visibility

Allowed = Callable[[list[int]], set[int]]  # the subset of candidate ids the caller may see
Finish = Callable[[Allowed | None], list[tuple[int, float]]]  # the rest of a prepared search


def remembered(allowed: Allowed) -> Allowed:
    """`allowed`, asked about each id once: the verdicts are kept for the next calls (a search
    that offers candidates again, several searches of one viewer in one snapshot)."""
    passed: set[int] = set()
    asked: set[int] = set()

    def remembering(ids: list[int]) -> set[int]:
        new = [item_id for item_id in ids if item_id not in asked]
        if new:
            passed.update(allowed(new).intersection(new))
            asked.update(new)
        return passed.intersection(ids)

    return remembering


class VisibleTo:
    """An `Allowed` that carries its rule: the ids among the candidates that `rule` admits
    (`ItemsTx.visible_ids`). A search in the database applies `rule` inside its query
    instead of calling it with candidates."""

    def __init__(
        self, store: Store, rule: Visibility, check: Allowed | None = None, tx: Tx | None = None
    ) -> None:
        self.store = store
        self.rule = rule
        self.check = check  # the same rule in a transaction the caller holds (one snapshot)
        # that transaction: the search's reads run in it (its snapshot, and no pooled connection
        # taken meanwhile, which searches holding one each would wait for: a pool deadlock)
        self.tx = tx

    def __call__(self, ids: list[int]) -> set[int]:
        if self.check is not None:
            return self.check(ids)
        with self.store.transaction(write=False) as tx:
            return tx.visible_ids(self.rule.viewer, ids, self.rule.kinds, self.rule.project_id)


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

    def search_many(
        self, asks: Sequence[tuple[npt.ArrayLike, Allowed | None]], k: int
    ) -> list[list[tuple[int, float]]]:
        """`search` for each (query, allowed), in order: what a batch of searches can share
        (reads of the store) is done once. An approximate implementation may find a batch's
        candidates another way than one query's (the numpy index scans every row for a batch
        of a mid-sized index, where a search alone takes its sketch pass)."""
        ...

    def prepare(self, query_vec: npt.ArrayLike, k: int) -> Finish:
        """`search` in two steps: what needs no database now (any thread), the rest when the
        returned function is called with `allowed` (in the transaction it carries, a
        `VisibleTo`'s `tx`, or the calling thread's read transaction);
        `prepare(q, k)(allowed) == search(q, k, allowed)`."""
        ...


def vector_search_for(store: Store, embedder_id: str, dim: int) -> VectorSearch:
    """The vector search that suits `store`'s backend."""
    if isinstance(store, NearestVectors):
        from memhub.search.store_vectors import StoreVectorSearch

        return StoreVectorSearch(store, embedder_id, dim)
    if store.backend == "sqlite":
        from memhub.search.vectors import VectorIndex

        return VectorIndex(store, embedder_id, dim)
    raise ValueError(f"no vector search for the {store.backend} backend")
