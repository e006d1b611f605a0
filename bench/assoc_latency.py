"""Latency of the assoc toolset through the real MCP client over stdio, at 10k and 100k memories.

    .venv/bin/python bench/assoc_latency.py --sizes 10000,100000 [--embedder e5]

Seeding: N memories in a mix of domains, written in-process through the store; their vectors
are real embeddings of a pool of distinct texts (embedding 100k texts would take ~40 min on
this machine, and the search cost depends on the matrix size, not on which rows repeat).
Then `memhub serve --transport stdio` starts (the index warms in the background; the
benchmark waits until the server answers health_check with every vector indexed) and the
client times memory.store, memory.search, search(semantic), search(tags), memory.get.
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
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MEMHUB, RESULTS, print_table, time_calls, write_report
from corpus import SUBJECTS_EN, SUBJECTS_JA, texts
from memhub.search import make_embedder
from memhub.store.base import NewItem
from memhub.store.sqlite import SqliteStore

POOL = 2000
TAGS = ["db", "deploy", "auth", "ui", "perf", "security", "test", "docs", "infra", "api"]
CATEGORIES = ["decision", "preference", "fact", "todo", "research"]


def seed(db: Path, n: int, embedder_name: str) -> None:
    embedder = make_embedder(embedder_name)
    assert embedder is not None
    embedder.load()
    pool = texts(POOL, seed=5)
    cache = RESULTS / f"pool-{embedder.id.replace('/', '-')}-{POOL}.npy"
    if cache.exists():
        vectors = np.load(cache)
    else:
        started = time.perf_counter()
        batches = [embedder.embed_passages(pool[i : i + 32]) for i in range(0, POOL, 32)]
        vectors = np.vstack(batches).astype("<f4")
        print(f"  embedded a pool of {POOL} texts in {time.perf_counter() - started:.0f}s", flush=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, vectors)
    store = SqliteStore(db)
    rng = random.Random(1)
    with store.transaction(write=True) as tx:
        tx.ensure_principal("bench")
        project = tx.insert_project("bench", None, {}, "bench").id
    for start in range(0, n, 5000):
        with store.transaction(write=True) as tx:
            for i in range(start, min(n, start + 5000)):
                k = i % POOL
                domain = rng.choice(["user", "user", "project", "global"])
                row = tx.insert_item(
                    NewItem(
                        kind="memory",
                        owner="bench",
                        scope=domain,
                        project_id=project if domain == "project" else None,
                        body=f"{pool[k]} (#{i})",
                        tags=rng.sample(TAGS, 2),
                        category=rng.choice(CATEGORIES),
                        importance=round(rng.random(), 2),
                        attrs={"metadata": {}},
                    )
                )
                tx.put_vector(row.id, embedder.id, vectors[k].tobytes(), embedder.dim)
    store.close()


async def measure(db: Path, n: int, embedder: str, queries: int) -> dict[str, dict[str, float]]:
    params = StdioServerParameters(
        command=MEMHUB,
        args=[
            "--db",
            str(db),
            "--user",
            "bench",
            "--project",
            "bench",
            "serve",
            "--transport",
            "stdio",
            "--embedder",
            embedder,
        ],
        env={"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "PATH": "/usr/bin:/bin"},
    )
    rng = random.Random(9)
    queries_text = (
        SUBJECTS_JA
        + SUBJECTS_EN
        + ["how do we deploy safely", "データベースの移行手順", "retry with backoff"]
    )
    new_texts = texts(queries + 50, seed=99)
    results: dict[str, dict[str, float]] = {}
    async with Client(params) as client:
        deadline = time.monotonic() + 600
        while True:  # wait for the background warm-up: model loaded, every vector in the index
            health = (await client.call_tool("admin", {"action": "health_check"})).structured_content or {}
            details = health.get("details", {})
            if details.get("embedder_ready") and details.get("vectors_indexed", 0) >= n:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"index did not warm up: {details}")
            await anyio.sleep(0.2)
        ids = [f"mem_{rng.randint(1, n)}" for _ in range(queries)]
        ops: dict[str, Any] = {
            "memory.store": lambda i: (
                "memory",
                {"action": "store", "content": new_texts[i], "domain": "user", "tags": rng.sample(TAGS, 2)},
            ),
            "memory.search": lambda i: (
                "memory",
                {"action": "search", "query": rng.choice(queries_text), "threshold": 0.0},
            ),
            "search.semantic": lambda i: (
                "search",
                {"type": "semantic", "query": rng.choice(queries_text), "threshold": 0.0},
            ),
            "search.tags": lambda i: ("search", {"type": "tags", "tags": rng.sample(TAGS, 1)}),
            "memory.get": lambda i: ("memory", {"action": "get", "memory_id": ids[i]}),
        }
        for _ in range(10):
            await client.call_tool("memory", {"action": "search", "query": "warm up", "threshold": 0.0})
        results = await time_calls(client, ops, queries, 1)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--out", default=str(RESULTS / "assoc_latency.json"))
    args = parser.parse_args()
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "embedder": args.embedder, "sizes": {}}
    for size in [int(x) for x in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.db"
            print(f"\n{size:,} memories: seeding", flush=True)
            started = time.perf_counter()
            seed(db, size, args.embedder)
            seeded = time.perf_counter() - started
            results = anyio.run(measure, db, size, args.embedder, args.queries)
            report["sizes"][size] = {"seed_s": round(seeded, 1), "ops": results}
        print(
            f"{size:,} memories (seeded in {seeded:.0f}s), embedder {args.embedder},"
            f" {args.queries} calls each"
        )
        print_table("", results)
    write_report(args.out, report)


if __name__ == "__main__":
    main()
