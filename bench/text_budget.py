"""The keyword side's BM25 row budget: its time and what it changes, on a seeded store.

    .venv/bin/python bench/text_budget.py --db /tmp/seeded/assoc-100000-none.db [--budgets 5000,2500] \
        [--sentences N]

Opens a database seeded by bench/assoc_latency.py (`--seeded DIR` keeps one; or a PostgreSQL
store, `--db postgresql://…`, seeded by `bench.assoc_latency.seed(url, n, embedder)`), and for each
budget times `Tx.text_search` (the keyword side of the one retrieval pipeline, 200 candidates
for memories, as assoc's search asks) over the assoc benchmark's queries, each in its own read
transaction, `--rounds` times. Reported per budget: p50 / p95 ms, and how many of the top 10
of an unbounded ranking (every matching row ranked) the bounded one keeps (overlap@10; the
seeded corpus repeats 2,000 texts, so many rows tie and this undercounts), and the share of the
unbounded top 10's summed BM25 the bounded top 10 reaches (kept@10: 1.0 when equally relevant).
`--sentences N` asks N single sentences of the seeded corpus's kind instead (Japanese, English
and mixed, several terms each: what `search_breakdown.py --fresh` asks after the queries above).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import QUERIES
from corpus import queries as corpus_queries
from memhub.core.models import Principal
from memhub.core.text import search_terms
from memhub.services import access
from memhub.store.open import open_store

UNBOUNDED = 10**9


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", required=True)
    parser.add_argument("--budgets", default="5000,4000,3000,2500,2000,1000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--split-cjk", action="store_true", help="the text-only keyword side (no vectors)")
    parser.add_argument("--sentences", type=int, default=0, help="ask N sentences of the corpus instead")
    args = parser.parse_args()
    store = open_store(args.db)
    actor = Principal(id="bench", default_project="bench")
    with store.transaction(write=False) as tx:
        viewer = access.viewer(tx, actor, sessions="current")
    texts = corpus_queries(len(QUERIES) + args.sentences)[len(QUERIES) :] if args.sentences else QUERIES
    asked = [search_terms(q, split_cjk=args.split_cjk) for q in texts]
    with store.transaction(write=False) as tx:
        exact = [tx.text_search(viewer, t, ("memory",), None, 200, UNBOUNDED)[:10] for t in asked]
    print(f"{len(asked)} queries x {args.rounds} rounds; p50 / p95 ms; overlap@10 with the unbounded ranking")
    for budget in [int(b) for b in args.budgets.split(",")]:
        times: list[float] = []
        overlap: list[float] = []
        kept: list[float] = []
        for _ in range(args.rounds):
            for terms, best in zip(asked, exact, strict=True):
                with store.transaction(write=False) as tx:
                    started = time.perf_counter()
                    hits = tx.text_search(viewer, terms, ("memory",), None, 200, budget)
                    times.append((time.perf_counter() - started) * 1000)
                top = {i for i, _ in hits[:10]}
                overlap.append(len(top & {i for i, _ in best}) / len(best) if best else 1.0)
                whole = sum(score for _, score in best)
                kept.append(sum(score for _, score in hits[:10]) / whole if whole else 1.0)
        times.sort()
        p95 = times[int(0.95 * (len(times) - 1))]
        print(
            f"budget {budget:>6,}: {statistics.median(times):6.2f} / {p95:6.2f} ms,"
            f" overlap@10 {statistics.mean(overlap):.3f}, BM25 kept@10 {statistics.mean(kept):.3f}"
        )
    store.close()


if __name__ == "__main__":
    main()
