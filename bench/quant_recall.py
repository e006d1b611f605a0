"""Recall and speed of the int8 vector index against an exact float32 scan, at 100k rows.

    .venv/bin/python bench/quant_recall.py [--rows 100000] [--queries 500] [--embedder e5+use]

Data: real embeddings of a pool of 2,000 distinct texts (bench/corpus.py, cached in
bench/results/ as bench/assoc_latency.py caches them), mixed into `--rows` distinct rows:
row = unit(pool[a] + u * pool[b] + noise), u uniform in [0, 0.5), noise of norm ~0.25, so
every pool text has ~50 close variants (a crowded neighbourhood: the 10th and 11th best differ
by ~2e-4 in cosine, finer than int8's error). Queries: unit(pool[c] + noise of norm ~0.3).
The rows go into a real SQLite store (the rescoring reads the float32 vectors from it).

For each query the exact top k (float32 scan of every row, ties by id) is compared with
  - the codes alone: every row scored from its int8 codes (no rescoring), and
  - the index (`VectorIndex` as the server builds it: sketch pass, codes, exact rescoring of
    the best k + rescore_extra, at most 60), for each `--extra` value, and without the
    sketch pass (every row scored from its codes, then the same rescoring),
at k = 10 and k = 50 (the engine's k_vec). Reported: recall of the exact top k, the share of
queries whose ranked top k is identical, search p50/p95 ms, the index's load time and the
process RSS growth while loading it. Writes bench/results/quant_recall.json.
"""

from __future__ import annotations

import argparse
import gc
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, pct, write_report
from corpus import texts
from memhub.search import make_embedder
from memhub.search.vectors import APPROX_MIN, VectorIndex, quantise
from memhub.store.base import NewItem
from memhub.store.sqlite import SqliteStore

POOL = 2000
Floats = npt.NDArray[np.float32]


def rss_mib() -> float:
    status = Path("/proc/self/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+)", status)
    return int(match.group(1)) / 1024 if match else 0.0


def pool_vectors(embedder_name: str) -> tuple[str, Floats]:
    embedder = make_embedder(embedder_name)
    assert embedder is not None
    cache = RESULTS / f"pool-{embedder.id.replace('/', '-')}-{POOL}.npy"
    if not cache.exists():
        embedder.load()
        pool = texts(POOL, seed=5)
        batches = [embedder.embed_passages(pool[i : i + 32]) for i in range(0, POOL, 32)]
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, np.vstack(batches).astype("<f4"))
    return embedder.id, np.load(cache).astype(np.float32)


def unit(rows: Floats) -> Floats:
    out: Floats = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return out


def dataset(pool: Floats, rows: int, queries: int) -> tuple[Floats, Floats]:
    rng = np.random.default_rng(1)
    dim = pool.shape[1]
    a, b = rng.integers(0, len(pool), rows), rng.integers(0, len(pool), rows)
    mix = rng.uniform(0, 0.5, (rows, 1)).astype(np.float32)
    noise = rng.standard_normal((rows, dim)).astype(np.float32) * np.float32(0.25 / np.sqrt(dim))
    data = unit(pool[a] + mix * pool[b] + noise)
    c = rng.integers(0, len(pool), queries)
    qnoise = rng.standard_normal((queries, dim)).astype(np.float32) * np.float32(0.3 / np.sqrt(dim))
    return data, unit(pool[c] + qnoise)


def top_k(scores: Floats, ids: npt.NDArray[np.int64], k: int) -> list[int]:
    best = np.argpartition(-scores, k)[: k * 4]  # enough room for ties at the cut
    order = best[np.lexsort((ids[best], -scores[best]))][:k]
    return [int(i) for i in ids[order]]


def compare(got: list[list[int]], exact: list[list[int]]) -> dict[str, float]:
    k = len(exact[0])
    recall = np.mean([len(set(g) & set(e)) / k for g, e in zip(got, exact, strict=True)])
    same = np.mean([g == e for g, e in zip(got, exact, strict=True)])
    return {"recall": round(float(recall), 4), "identical_ranking": round(float(same), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--embedder", default="e5+use")
    parser.add_argument("--extra", default="0,10,20", help="rescore_extra values to measure")
    parser.add_argument("--out", default=str(RESULTS / "quant_recall.json"))
    args = parser.parse_args()

    embedder_id, pool = pool_vectors(args.embedder)
    data, queries = dataset(pool, args.rows, args.queries)
    dim = data.shape[1]
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "embedder": embedder_id,
        "rows": args.rows,
        "queries": args.queries,
    }
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "quant.db")
        started = time.perf_counter()
        with store.transaction(write=True) as tx:
            tx.ensure_principal("bench")
        ids_list: list[int] = []
        for start in range(0, args.rows, 5000):
            with store.transaction(write=True) as tx:
                for i in range(start, min(args.rows, start + 5000)):
                    new = NewItem(kind="memory", owner="bench", scope="user", body=f"row {i}")
                    item = tx.insert_item(new)
                    tx.put_vector(item.id, embedder_id, data[i].astype("<f4").tobytes(), dim)
                    ids_list.append(item.id)
        ids = np.asarray(ids_list, dtype=np.int64)
        print(f"{args.rows:,} rows of {dim} dims stored in {time.perf_counter() - started:.0f}s", flush=True)

        exact: dict[int, list[list[int]]] = {10: [], 50: []}
        codes_only: dict[int, list[list[int]]] = {10: [], 50: []}
        codes, scales = quantise(data)
        for start in range(0, len(queries), 50):
            block = queries[start : start + 50]
            exact_scores = block @ data.T
            approx_scores = (block @ codes.T.astype(np.float32)) * scales
            for row in range(len(block)):
                for k in (10, 50):
                    exact[k].append(top_k(exact_scores[row], ids, k))
                    codes_only[k].append(top_k(approx_scores[row], ids, k))
        del codes, scales
        report["codes_only"] = {k: compare(codes_only[k], exact[k]) for k in (10, 50)}
        print(f"codes alone (no rescoring): {report['codes_only']}", flush=True)

        report["index"] = {}
        variants = [(f"rescore_extra={x}", int(x), True) for x in args.extra.split(",")]
        variants.append(("no sketch pass, rescore_extra=20", 20, False))
        for name, extra, sketch in variants:
            gc.collect()
            before = rss_mib()
            approx_min = APPROX_MIN if sketch else args.rows + 1
            index = VectorIndex(store, embedder_id, dim, rescore_extra=extra, approx_min=approx_min)
            started = time.perf_counter()
            index.refresh()
            load_s = time.perf_counter() - started
            grown = rss_mib() - before
            result: dict[str, Any] = {"load_s": round(load_s, 1), "rss_growth_mib": round(grown)}
            for k in (10, 50):
                got: list[list[int]] = []
                times: list[float] = []
                for query in queries:
                    began = time.perf_counter()
                    hits = index.search(query, k)
                    times.append((time.perf_counter() - began) * 1000)
                    got.append([i for i, _ in hits])
                result[f"k{k}"] = compare(got, exact[k]) | {
                    "p50_ms": round(pct(times, 0.5), 2),
                    "p95_ms": round(pct(times, 0.95), 2),
                }
            report["index"][name] = result
            print(f"index, {name}: {result}", flush=True)
            del index
        store.close()
    write_report(args.out, report)


if __name__ == "__main__":
    main()
