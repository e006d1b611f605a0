"""What conversation context (search/context.py) adds to one memory search, in process.

    .venv/bin/python bench/context_cost.py [--n 10000] [--calls 300] [--backend sqlite|postgresql]

Seeds a throwaway store with `--n` memories in sessions of 20, each temporally linked to the
one before it (as `memory(store)` links them) and every tenth one semantically linked to a
random older one, then times what assoc's memory search now does more per query: read the
temporal neighbours of the candidates that may still reach the first results
(`context.contenders`: tens of the 200; `--ids` sizes, 200 = every candidate) in the search's
read transaction (`context.neighbours`, one links query) and lend the 200 candidates'
relevance (`context.lend`); then what the query-dependent weight and diversity add (issue 23,
second round): the keyword coverage of the 20 best BM25 candidates (`ranking.COVERAGE_PROBE`,
LoCoMo-length texts; most are computed for relevance anyway) and reading the stored vectors of
the 20 best-scored candidates (896 floats each, e5+use's size) plus choosing 10 of them by
maximal marginal relevance (`search/diversity.py`). p50 / p95 of CPU milliseconds
(`time.thread_time`: stable on a shared machine, where wall time mostly measures waiting),
inside the search's transaction.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from memhub.core.models import Kind
from memhub.core.text import term_coverage
from memhub.search.context import lend, neighbours
from memhub.search.diversity import diversify
from memhub.store.base import NewItem
from memhub.store.open import open_store

SESSION = 20
CANDIDATES = 200
DIM = 896
EMBEDDER = "bench-896"
POOL = 20
TURN = (
    "[1:56 pm on 8 May, 2023] Melanie: Yep, Caroline. Taking care of ourselves is vital. "
    "I'm off to go swimming with the kids after the pottery class. Talk to you soon!"
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--ids", default="200,50,25", help="items whose links are read per search")
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="memhub-context-") as home, ExitStack() as stack:
        url: str = str(Path(home) / "store.db")
        if args.backend == "postgresql":
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from pg import embedded_database

            url = stack.enter_context(embedded_database(Path(home) / "postgres"))
        store = open_store(url)
        try:
            with store.transaction(write=True) as tx:
                tx.ensure_principal("bench")
                ids = [
                    tx.insert_item(
                        NewItem(kind=Kind.MEMORY, owner="bench", scope="user", body=f"memory {i}")
                    ).id
                    for i in range(args.n)
                ]
                for i in range(1, args.n):
                    if i % SESSION:
                        tx.upsert_link(ids[i], ids[i - 1], "association", "temporal", 1.0)
                    if i % 10 == 0:
                        tx.upsert_link(ids[i], ids[rng.randrange(i)], "association", "semantic", 0.9)
                gen = np.random.default_rng(7)
                for item in ids:
                    v = gen.standard_normal(DIM).astype("<f4")
                    tx.put_vector(item, EMBEDDER, (v / np.linalg.norm(v)).astype("<f4").tobytes(), DIM)
            for size in (int(x) for x in args.ids.split(",")):
                read, total = [], []
                for _ in range(args.calls):
                    candidates = rng.sample(ids, CANDIDATES)
                    scores = {item: rng.random() for item in candidates}
                    with store.transaction(write=False) as tx:  # the search's own: not timed
                        started = time.thread_time()
                        near = neighbours(tx, candidates[:size])
                        middle = time.thread_time()
                        lend(scores, near, 0.2)
                        ended = time.thread_time()
                    read.append((middle - started) * 1000)
                    total.append((ended - started) * 1000)
                print(
                    f"{args.backend}, {args.n} memories, links of {size} of {CANDIDATES} candidates, "
                    f"{args.calls} calls: neighbours p50 {statistics.median(read):.2f} ms "
                    f"p95 {_p(read, 0.95):.2f}; neighbours + lend p50 {statistics.median(total):.2f} ms "
                    f"p95 {_p(total, 0.95):.2f}",
                    flush=True,
                )
            cover, diverse = [], []
            share = term_coverage("What activities does Melanie partake in with her kids?")
            texts = [f"{TURN} {i}" for i in range(POOL)]
            for _ in range(args.calls):
                pool = rng.sample(ids, POOL)
                scores = dict(zip(pool, sorted((rng.random() for _ in pool), reverse=True), strict=True))
                with store.transaction(write=False) as tx:
                    started = time.thread_time()
                    for text in texts:
                        share(text)
                    middle = time.thread_time()
                    blobs = tx.get_vectors(pool, EMBEDDER)
                    vectors = {i: np.frombuffer(b, dtype="<f4") for i, b in blobs.items()}
                    diversify(pool, scores, dict.fromkeys(pool, 0.8), vectors, 0.639, 0.083, 10)
                    ended = time.thread_time()
                cover.append((middle - started) * 1000)
                diverse.append((ended - middle) * 1000)
            print(
                f"{args.backend}, {args.n} memories, {args.calls} calls: coverage of {POOL} turns p50 "
                f"{statistics.median(cover):.2f} ms p95 {_p(cover, 0.95):.2f}; {POOL} vectors read + "
                f"diversity p50 {statistics.median(diverse):.2f} ms p95 {_p(diverse, 0.95):.2f}",
                flush=True,
            )
        finally:
            store.close()
    return 0


def _p(values: list[float], share: float) -> float:
    return sorted(values)[int(share * (len(values) - 1))]


if __name__ == "__main__":
    raise SystemExit(main())
