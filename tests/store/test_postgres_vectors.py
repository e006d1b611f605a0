"""PostgreSQL's nearest neighbours in the database (store/postgres/vectors.py): the HNSW index is
what the query walks, with the visibility filter inside it, and a filter that admits few rows
still yields `k` (pgvector's iterative scan, then the exact scan). PostgreSQL only; the answers
both backends share are tests/search/test_store_vectors.py's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memhub.core.models import Viewer
from memhub.store.base import NearestVectors, NewItem, Visibility
from memhub.store.open import open_store
from memhub.store.postgres.database import PostgresStore
from memhub.store.postgres.vectors import nearest, nearest_sql, vector_literal
from tests.store.backends import Backend, selected

pytestmark = pytest.mark.skipif(
    selected().name != "postgresql", reason="needs MEMHUB_TEST_BACKEND=postgresql"
)

NOW = "2030-01-01T00:00:00.000000Z"
DIM = 16
EMB = "test/16"
ROWS = 1_500


@pytest.fixture(scope="module")
def loaded(
    tmp_path_factory: pytest.TempPathFactory, backend: Backend
) -> tuple[PostgresStore, np.ndarray, int]:
    """ROWS random unit vectors; every 50th item is alice's (scope user), the rest bob's."""
    store = open_store(backend.url(tmp_path_factory.mktemp("pgvec")))
    assert isinstance(store, PostgresStore)
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(ROWS, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    with store.transaction(write=True) as tx:
        first = 0
        for i, row in enumerate(matrix):
            owner = "alice" if i % 50 == 0 else "bob"
            item = tx.insert_item(NewItem(kind="memory", owner=owner, scope="user", body=f"row {i}")).id
            first = first or item
            tx.put_vector(item, EMB, row.astype("<f4").tobytes(), DIM)
    with store.transaction(write=True) as tx:
        tx.conn.execute("ANALYZE")
    yield store, matrix, first
    store.close()


def exact(
    matrix: np.ndarray, first: int, query: np.ndarray, k: int, rows: np.ndarray | None = None
) -> list[int]:
    scores = matrix @ query
    order = [int(i) for i in np.argsort(-scores) if rows is None or rows[i]]
    return [first + i for i in order[:k]]


def test_the_query_walks_the_hnsw_index_with_the_filter_inside(
    loaded: tuple[PostgresStore, np.ndarray, int],
) -> None:
    store, matrix, _ = loaded
    sql, args = nearest_sql(
        EMB, DIM, vector_literal(matrix[0]), 10, Visibility(Viewer("bob", NOW)), indexed=True
    )
    with store.transaction(write=False) as tx:
        plan = "\n".join(r["QUERY PLAN"] for r in tx.conn.execute("EXPLAIN " + sql, args))
    assert f"Index Scan using vectors_hnsw_{DIM}" in plan, plan
    assert "owner = 'bob'" in plan, plan  # the visibility filter, applied as the walk goes


def test_index_answers_match_the_exact_scan(loaded: tuple[PostgresStore, np.ndarray, int]) -> None:
    store, matrix, first = loaded
    rng = np.random.default_rng(4)
    found = total = 0
    for query in rng.normal(size=(20, DIM)).astype(np.float32):
        query /= np.linalg.norm(query)
        with store.transaction(write=False) as tx:
            got = nearest(tx.conn, EMB, query.tolist(), 10, None)
            reference = nearest(tx.conn, EMB, query.tolist(), 10, None, exact=True)
        assert [i for i, _ in reference] == exact(matrix, first, query, 10)
        scores = [s for _, s in got]
        assert scores == sorted(scores, reverse=True)
        found += len({i for i, _ in got} & {i for i, _ in reference})
        total += 10
    assert found / total >= 0.95


def test_a_filter_admitting_two_percent_still_yields_k(loaded: tuple[PostgresStore, np.ndarray, int]) -> None:
    """Alice may read 30 of 1,500 rows: with the index forced and a walk of 10 candidates, the
    iterative scan (or the exact scan after it) still returns her best 20, in order."""
    store, matrix, first = loaded
    alices = np.arange(ROWS) % 50 == 0
    rng = np.random.default_rng(5)
    for query in rng.normal(size=(5, DIM)).astype(np.float32):
        query /= np.linalg.norm(query)
        with store.transaction(write=False) as tx:
            tx.conn.execute("SET LOCAL enable_seqscan = off")
            got = nearest(tx.conn, EMB, query.tolist(), 20, Visibility(Viewer("alice", NOW)), ef_search=10)
        expected = exact(matrix, first, query, 20, alices)
        assert len(got) == 20 and len(set(i for i, _ in got) & set(expected)) >= 18
        assert {i for i, _ in got} <= {first + int(i) for i in np.flatnonzero(alices)}
        with store.transaction(write=False) as tx:
            everything = nearest(tx.conn, EMB, query.tolist(), 100, Visibility(Viewer("alice", NOW)))
        assert [i for i, _ in everything] == exact(matrix, first, query, 100, alices)  # all 30, exactly


def test_the_store_offers_nearest_vectors(tmp_path: Path, backend: Backend) -> None:
    store = open_store(backend.url(tmp_path))
    try:
        assert isinstance(store, NearestVectors)
        assert store.nearest_vectors(EMB, [1.0] * DIM, 5) == []
    finally:
        store.close()
