"""Latency of the pce toolset through the real MCP client over stdio, at 10k and 100k claims.

    .venv/bin/python bench/pce_bench.py --sizes 10000,100000 [--embedder e5+use] [--queries 100]

Seeding (the method of bench/assoc_latency.py): N claims of mixed kinds in the project and
principle scopes, public and internal, written in-process through the store with provenance;
their vectors are real embeddings of a pool of distinct texts (cached in bench/results). Then
`memhub serve` starts over stdio; once every vector is indexed (admin health_check), the
benchmark times `--queries` calls each of pce.memory.search, pce.memory.activate (top_k 12,
which also stores an active context), pce.memory.upsert and pce.memory.boundary.validate,
and reports the server's resident memory.
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
from memhub.search import make_embedder
from memhub.services.pce.claims import claim_hash
from memhub.store.base import NewItem
from memhub.store.sqlite import SqliteStore

POOL = 2000
KINDS = ["fact", "fact", "task", "preference", "policy_hint"]
SERVER_ENV = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "PATH": "/usr/bin:/bin"}
PROV = {"at": "2025-01-31T12:00:00Z", "git": {"commit": "abc1234"}}


def pool_vectors(embedder_name: str, pool: list[str]) -> tuple[Any, np.ndarray]:
    embedder = make_embedder(embedder_name)
    assert embedder is not None, f"embedder {embedder_name} is not installed"
    embedder.load()
    cache = RESULTS / f"pool-{embedder.id.replace('/', '-')}-{POOL}.npy"
    if cache.exists():
        return embedder, np.load(cache)
    started = time.perf_counter()
    vectors = np.vstack([embedder.embed_passages(pool[i : i + 32]) for i in range(0, POOL, 32)]).astype("<f4")
    print(f"  embedded a pool of {POOL} texts in {time.perf_counter() - started:.0f}s", flush=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return embedder, vectors


def seed(db: Path, n: int, embedder_name: str) -> None:
    pool = texts(POOL, seed=5)
    embedder, vectors = pool_vectors(embedder_name, pool)
    store = SqliteStore(db)
    rng = random.Random(1)
    with store.transaction(write=True) as tx:
        tx.ensure_principal("bench")
        project = tx.insert_project("bench", None, {}, "bench").id
    for start in range(0, n, 5000):
        with store.transaction(write=True) as tx:
            for i in range(start, min(n, start + 5000)):
                k = i % POOL
                scope = rng.choice(["project", "project", "principle"])
                text = f"{pool[k]} (#{i})"
                row = tx.insert_item(
                    NewItem(
                        kind="claim",
                        owner="bench",
                        scope="project" if scope == "project" else "user",
                        project_id=project if scope == "project" else None,
                        body=text,
                        boundary_class=rng.choice(["internal", "internal", "public"]),
                        category=rng.choice(KINDS),
                        attrs={"pce_scope": scope, "provenance": PROV, "relations": []},
                        content_hash=claim_hash(text),
                    )
                )
                tx.put_vector(row.id, embedder.id, vectors[k].tobytes(), embedder.dim)
    store.close()


async def health(client: Any) -> dict[str, Any]:
    result = await client.call_tool("admin", {"action": "health_check"})
    assert not result.is_error, result.content
    details: dict[str, Any] = (result.structured_content or {}).get("details", {})
    return details


async def measure(db: Path, n: int, embedder: str, queries: int) -> dict[str, Any]:
    rng = random.Random(9)
    questions = (
        SUBJECTS_JA
        + SUBJECTS_EN
        + ["how do we deploy safely", "データベースの移行手順", "retry with backoff"]
    )
    new_texts = texts(queries + 50, seed=99)
    payloads = [
        "連絡は yamada.taro@example.co.jp / 090-1234-5678 まで（注文 ORD-2024-0315）",
        "deploy with AKIAIOSFODNN7EXAMPLE and the usual checklist",
        "The retry budget is three attempts with exponential backoff; see v1.2.3 release notes.",
    ]
    out: dict[str, Any] = {}
    async with memhub_server(db, transport="stdio", embedder=embedder, env=SERVER_ENV) as (client, pid):
        deadline = time.monotonic() + 600
        while True:
            details = await health(client)
            if details.get("embedder_ready") and details.get("vectors_indexed", 0) >= n:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"index did not warm up: {details}")
            await anyio.sleep(0.2)
        reads: dict[str, Any] = {
            "pce.search": lambda i: ("pce.memory.search", {"query": rng.choice(questions)}),
            "pce.activate": lambda i: ("pce.memory.activate", {"q": rng.choice(questions), "top_k": 12}),
            "pce.boundary": lambda i: ("pce.memory.boundary.validate", {"payload": payloads[i % 3]}),
        }
        writes: dict[str, Any] = {
            "pce.upsert": lambda i: (
                "pce.memory.upsert",
                {"text": new_texts[i], "kind": "fact", "scope": "project", "provenance": PROV},
            ),
        }
        for _ in range(10):
            await client.call_tool("pce.memory.search", {"query": "warm up"})
        out["ops"] = await time_calls(client, reads, queries, 1)
        out["ops"] |= await time_calls(client, writes, queries, 1)
        out["rss_mib"] = rss_mib(pid)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--embedder", default="e5+use", help="the server default (auto) is e5+use")
    parser.add_argument("--out", default=str(RESULTS / "pce_bench.json"))
    args = parser.parse_args()
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "embedder": args.embedder,
        "transport": "stdio",
        "queries": args.queries,
        "sizes": {},
    }
    for size in [int(x) for x in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.db"
            print(f"\n{size:,} claims: seeding", flush=True)
            started = time.perf_counter()
            seed(db, size, args.embedder)
            seeded = time.perf_counter() - started
            measured = anyio.run(measure, db, size, args.embedder, args.queries)
            report["sizes"][size] = {"seed_s": round(seeded, 1), **measured}
        print(
            f"{size:,} claims (seeded in {seeded:.0f}s), embedder {args.embedder}, stdio,"
            f" {args.queries} calls each"
        )
        print_table("", measured["ops"])
        print(format_rss(measured["rss_mib"]))
    write_report(args.out, report)


if __name__ == "__main__":
    main()
