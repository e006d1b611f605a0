"""Latency of `search_decisions` (seed 002) through the real MCP client over stdio.

    .venv/bin/python bench/decisions_bench.py --sizes 10000 [--embedder none|hash|use|e5+use]

For each size: seed a fresh database with that many decisions, written in-process through the
one decision model (about 2,000 targets, so chains of superseded versions: 60 % of the writes
on a target supersede its current decision; 10 % by a person, 3 % drafts, 2 % deprecated),
with vectors for every decision when `--embedder` is not `none` (the texts the backfill would
embed). Then start `memhub serve` over stdio (method of bench/latency.py; one passive OpenMP
thread), wait until the model is loaded and every vector indexed, and time
`--queries` calls of search_decisions in each mode (limit 5) and of record_decision. Prints
p50/p95 in milliseconds and the server's resident memory; writes
bench/results/decisions_latency.json.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, format_rss, memhub_server, print_table, rss_mib, time_calls, write_report
from corpus import SUBJECTS_EN, SUBJECTS_JA, texts
from memhub.core.models import Principal
from memhub.search import make_embedder
from memhub.services import decision_model
from memhub.store.sqlite import SqliteStore

AGENT = Principal(id="bench", via="mcp", default_project="bench")
PERSON = Principal(id="bench", via="cli", default_project="bench")
BATCH = 1000
# numpy/ONNX in the server on one passive thread, as `make bench` and the assoc benchmark run it
SERVER_ENV = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "PATH": "/usr/bin:/bin"}


def seed(db: Path, n: int) -> int:
    """n decisions in project `bench`; returns the number of targets."""
    store = SqliteStore(db)
    rng = random.Random(5)
    corpus = texts(2 * n)
    n_targets = max(10, n // 5)
    current: dict[int, int] = {}  # target -> its current decision
    with store.transaction(write=True) as tx:
        tx.ensure_principal("bench")
        project = tx.insert_project("bench", None, {}, "bench").id
    for start in range(0, n, BATCH):
        with store.transaction(write=True) as tx:
            for i in range(start, min(n, start + BATCH)):
                t = rng.randrange(n_targets)
                target = f"{SUBJECTS_EN[t % len(SUBJECTS_EN)]} / {SUBJECTS_JA[t % len(SUBJECTS_JA)]} #{t}"
                old = current.get(t)
                supersedes = [old] if old is not None and rng.random() < 0.6 else []
                actor = PERSON if rng.random() < 0.1 else AGENT
                new = decision_model.NewDecision(
                    project_id=project,
                    title=corpus[2 * i][:120],
                    rationale=corpus[2 * i + 1],
                    target=target,
                    origin="decisions",
                    draft=rng.random() < 0.03,
                    supersedes=supersedes,
                )
                row = decision_model.create(tx, actor, new)
                current[t] = row.id
                if rng.random() < 0.02:
                    record = decision_model.records(tx, [row])[0]
                    decision_model.deprecate(tx, PERSON, record, "retired in the benchmark")
    store.close()
    return n_targets


def embed_all(db: Path, embedder_name: str) -> float:
    """Vectors for every item the backfill would embed; seconds taken."""
    embedder = make_embedder(embedder_name)
    assert embedder is not None
    embedder.load()
    store = SqliteStore(db)
    started = time.perf_counter()
    after = 0
    while True:
        with store.transaction(write=False) as tx:
            todo = tx.missing_vectors(embedder.id, 256, after)
        if not todo:
            break
        matrix = np.asarray(embedder.embed_passages([text for _, text in todo]), dtype="<f4")
        with store.transaction(write=True) as tx:
            for (item_id, _), vec in zip(todo, matrix, strict=True):
                tx.put_vector(item_id, embedder.id, vec.tobytes(), embedder.dim)
        after = todo[-1][0]
    store.close()
    return time.perf_counter() - started


async def measure(
    db: Path, n: int, queries: int, embedder: str
) -> tuple[dict[str, dict[str, float]], dict[str, float] | None]:
    rng = random.Random(17)
    words = [*SUBJECTS_EN, *SUBJECTS_JA, "sqlite retry", "plan mode", "設計 レビュー", "no-such-word"]

    def search(mode: str) -> Any:
        return lambda _: ("search_decisions", {"query": rng.choice(words), "mode": mode, "limit": 5})

    ops: dict[str, Any] = {
        "search strict": search("strict"),
        "search balanced": search("balanced"),
        "search audit": search("audit"),
        "record_decision": lambda i: (
            "record_decision",
            {"title": f"bench decision {i}", "target": f"target {i % 50}", "rationale": "measured write"},
        ),
    }
    server = memhub_server(db, transport="stdio", embedder=embedder, env=SERVER_ENV)
    async with server as (client, server_pid):
        deadline = time.monotonic() + 600
        while embedder != "none":  # the model loaded and every vector indexed (assoc's health_check)
            result = await client.call_tool("admin", {"action": "health_check"})
            details = (result.structured_content or {}).get("details", {})
            if details.get("embedder_ready") and details.get("vectors_indexed", 0) >= n:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"index did not warm up: {details}")
            await anyio.sleep(0.2)
        for _ in range(20):  # warm up
            await client.call_tool("search_decisions", {"query": "warm up"})
        results = await time_calls(client, ops, queries, 2)
        rss = rss_mib(server_pid)
    return results, rss


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", default="none")
    parser.add_argument("--out", default=str(RESULTS / "decisions_latency.json"))
    args = parser.parse_args()
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "embedder": args.embedder, "sizes": {}}
    for size in [int(x) for x in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.db"
            started = time.perf_counter()
            targets = seed(db, size)
            seeded = time.perf_counter() - started
            embedded = embed_all(db, args.embedder) if args.embedder != "none" else 0.0
            results, rss = anyio.run(measure, db, size, args.queries, args.embedder)
        report["sizes"][size] = {
            "seed_s": round(seeded, 1),
            "embed_s": round(embedded, 1),
            "targets": targets,
            "ops": results,
            "rss_mib": rss,
        }
        print(
            f"\n{size:,} decisions on {targets:,} targets, seeded in {seeded:.1f}s"
            f" (vectors {embedded:.1f}s, embedder {args.embedder}); stdio, {args.queries} calls each"
        )
        print_table("", results)
        print(format_rss(rss))
    write_report(args.out, report)


if __name__ == "__main__":
    main()
