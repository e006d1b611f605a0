"""Nearest neighbours in the database: pgvector's HNSW index, the visibility filter in the query.

`PostgresTx.put_vector` keeps every vector in the `embedding` column and makes one partial
HNSW index (`vector_cosine_ops`) per dimension, over `embedding::vector(dim)` where `dim`
matches. `nearest` orders by that very expression, so the planner walks the index, joins
each candidate to its item and applies the single visibility filter (store/sql/visibility.py,
through `item_where`) before the LIMIT: with pgvector's iterative scan (0.8,
`hnsw.iterative_scan = relaxed_order`) the walk goes on past `hnsw.ef_search` candidates
until `k` rows pass the filter or `hnsw.max_scan_tuples` were visited. `relaxed_order` may
hand rows back slightly out of order, so the outer query sorts the `k` again (and breaks ties
by id). Should the walk still end short of `k` (a viewer who may read only a sliver of a large
store), the same query runs once more without the index, exactly: the planner then starts
from the viewer's items, which are few.

`EF_SEARCH`: the candidate list of one walk (at least `k`), chosen by bench/pgvector_recall.py
at 100k vectors with the index's default build (m 16, ef_construction 64): recall@10 0.99 or
more at 384 and 896 dimensions, where 100 gave 0.96-0.99 and 40 0.92-0.95 (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Connection
from psycopg.rows import DictRow

from memhub.store.base import ItemQuery, Visibility
from memhub.store.sql import POSTGRESQL, item_where

EF_SEARCH = 200  # hnsw.ef_search for k <= EF_SEARCH; k itself above (pgvector's ceiling: 1000)
MAX_EF_SEARCH = 1000
MAX_INDEXED_DIM = 2_000  # pgvector's HNSW ceiling for `vector`; larger ones are scanned exactly


def vector_literal(values: Sequence[float]) -> str:
    """pgvector's text form of a vector ('[1,2,3]'), exact for float32 values."""
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def nearest(
    conn: Connection[DictRow],
    embedder: str,
    query: Sequence[float],
    k: int,
    visible: Visibility | None,
    *,
    ef_search: int = EF_SEARCH,
    exact: bool = False,
) -> list[tuple[int, float]]:
    """The `k` best (item id, cosine) pairs, best first, ties by id (see the module doc).
    `exact`: skip the index (the reference the benchmark measures recall against)."""
    dim = len(query)
    if k <= 0 or dim == 0:
        return []
    indexed = 0 < dim <= MAX_INDEXED_DIM and not exact
    if indexed:
        conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, true),"
            " set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            (str(min(MAX_EF_SEARCH, max(ef_search, k))),),
        )
        hits = _run(conn, embedder, dim, vector_literal(query), k, visible, indexed=True)
        if len(hits) == k:
            return hits
    return _run(conn, embedder, dim, vector_literal(query), k, visible, indexed=False)


def _run(
    conn: Connection[DictRow],
    embedder: str,
    dim: int,
    literal: str,
    k: int,
    visible: Visibility | None,
    *,
    indexed: bool,
) -> list[tuple[int, float]]:
    sql, args = nearest_sql(embedder, dim, literal, k, visible, indexed=indexed)
    return [(int(r["item_id"]), float(r["score"])) for r in conn.execute(sql, args).fetchall()]


def nearest_sql(
    embedder: str, dim: int, literal: str, k: int, visible: Visibility | None, *, indexed: bool
) -> tuple[str, list[Any]]:
    """The query of one search (and its parameters): (item_id, score) rows, best first."""
    # the index's own expression when it should be used; the bare column (which no index
    # covers) for the exact scan
    if indexed:
        distance = f"v.embedding::vector({dim}) <=> %s::vector({dim})"
    else:
        distance = "v.embedding <=> %s::vector"
    args: list[Any] = [literal, embedder, dim]
    join = where = ""
    if visible is not None:
        cond, cond_args = item_where(
            visible.viewer, ItemQuery(kinds=visible.kinds, project_id=visible.project_id), POSTGRESQL
        )
        join, where = " JOIN items i ON i.id = v.item_id", f" AND {cond}"
        args.extend(cond_args)
    sql = (
        "WITH hits AS MATERIALIZED ("
        f" SELECT v.item_id, {distance} AS distance FROM vectors v{join}"
        f" WHERE v.embedder = %s AND v.dim = %s{where}"
        " ORDER BY distance LIMIT %s)"
        " SELECT item_id, 1 - distance AS score FROM hits ORDER BY distance, item_id"
    )
    return sql, [*args, k]
