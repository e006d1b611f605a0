"""Latency of the assoc toolset through the real MCP client, at 10k and 100k memories.

    .venv/bin/python bench/assoc_latency.py --sizes 1000,10000,100000 [--embedder e5+use|none]
        [--backend sqlite|postgresql] [--transport stdio|http] [--import-n 2000] [--seeded DIR]

The server runs the source on PYTHONPATH when it is set (a before/after comparison runs this
script twice, once per checkout, with `--seeded` so both search the same database).

Seeding: N memories in a mix of domains, written in-process through the store. Memory i's
body is text i % 2000 of a pool of distinct texts with ` (#i)` appended, and its vector that
text's real embedding (embedding 100k texts would take ~40 min on this machine) plus a small
random change (`variant`) that makes it as close to its siblings as real embeddings of such
bodies are: cosine ~0.976 between two of them with e5+use (0.94-0.99, `text (#i)` against
`text (#j)`, 2026-11-29), where distinct texts of the pool sit at ~0.78. Until 2026-11-29 the
~50 memories of one text shared one identical vector. A numpy scan does not care, but
pgvector's HNSW graph does: each group of identical vectors became an island of the graph
(every link of a node went to its twins), walks ran out inside one and fell back to an exact
scan (docs/benchmarks.md, "PostgreSQL at 100k").
Then `memhub serve` starts, over stdio (the client spawns it) or, with `--transport http`,
as a subprocess on a free 127.0.0.1 port reached at /mcp (its stderr goes to a log next to
the database). The index warms in the background; the benchmark waits until the server
answers health_check with every vector indexed, then times, `--queries` calls each:

1. memory.store. A store no longer embeds: vectors and semantic links come from the
   background backfill. So, before searching, the benchmark polls health_check until
   `details.vectors_pending` is false and reports that wait as `backfill_catch_up_s`.
2. memory.search, search(semantic), search(tags), memory.get.

After the timed calls it reports the server's resident memory (VmRSS now, VmHWM peak, MiB,
from /proc/<pid>/status; over stdio the pid is found by the db path on its command line).

Bulk import (`--import-n N`, default 2000, 0 skips it): N new memories (bench/corpus.py texts)
as a JSON array, one record per line, sent in one memory_manage(action="import") call; the
server's progress notifications (every 1,000 records) draw a bar on stderr. Reported: import
seconds and records/s, then the wait until vectors_pending is false again (the backfill
embedding and linking the imported memories) as embedding catch-up seconds and vectors/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    RESULTS,
    TRANSPORTS,
    format_rss,
    memhub_server,
    print_table,
    rss_mib,
    time_calls,
    write_report,
)
from corpus import QUERIES, texts
from memhub.search import make_embedder
from memhub.store.base import NewItem
from memhub.store.open import open_store
from pg import embedded_database

POOL = 2000
# each part's relative change (`variant`): two variants of one vector at cosine 1 / (1 + t^2)
VARIANT_T = 0.157  # ~0.976, as e5+use gives two bodies `text (#i)`, `text (#j)`
TAGS = ["db", "deploy", "auth", "ui", "perf", "security", "test", "docs", "infra", "api"]
CATEGORIES = ["decision", "preference", "fact", "todo", "research"]
SERVER_ENV = {
    "OMP_NUM_THREADS": "1",
    "OMP_WAIT_POLICY": "PASSIVE",
    "PATH": "/usr/bin:/bin",
    **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),  # which source
}
POLL_S = 0.1  # health_check polling while waiting for the backfill
CATCH_UP_DEADLINE_S = 600.0


def seed(db: Path | str, n: int, embedder_name: str) -> None:
    embedder = make_embedder(embedder_name)  # None: --embedder none, no vectors
    if embedder is not None:
        embedder.load()
    pool = texts(POOL, seed=5)
    cache = RESULTS / f"pool-{embedder.id.replace('/', '-') if embedder else 'none'}-{POOL}.npy"
    if embedder is None:
        vectors = np.zeros((POOL, 0), dtype="<f4")
    elif cache.exists():
        vectors = np.load(cache)
    else:
        started = time.perf_counter()
        batches = [embedder.embed_passages(pool[i : i + 32]) for i in range(0, POOL, 32)]
        vectors = np.vstack(batches).astype("<f4")
        print(f"  embedded a pool of {POOL} texts in {time.perf_counter() - started:.0f}s", flush=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, vectors)
    store = open_store(db)  # a SQLite path or a postgresql:// URL
    rng = random.Random(1)
    noise = np.random.default_rng(11)
    # a pair of models (search/embedders/combined.py) is two weighted unit vectors side by side
    first = getattr(embedder, "first", None)
    parts = (int(first.dim),) if first is not None else ()
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
                if embedder is not None:
                    vec = variant(vectors[k], parts, noise)
                    tx.put_vector(row.id, embedder.id, vec.tobytes(), embedder.dim)
    if str(db).startswith(("postgresql://", "postgres://")):
        # PostgreSQL: the planner's statistics, as autovacuum takes them within a minute of a
        # bulk write (and `memhub migrate` at once). Searched right after the seeding without
        # them, it scanned every vector rather than walk the HNSW index: 2026-11-25's figures
        # (docs/benchmarks.md)
        with store.transaction(write=True) as tx:
            tx.conn.execute("ANALYZE")  # type: ignore[attr-defined]
    store.close()


def variant(vec: np.ndarray, cuts: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """`vec` with each part (split at `cuts`) moved by Gaussian noise of VARIANT_T times its
    norm, then brought back to that norm: another memory's vector of the same text."""
    out = []
    for part in np.split(vec.astype(np.float64), list(cuts)):
        norm = float(np.linalg.norm(part))
        if norm == 0.0 or part.size == 0:
            out.append(part)
            continue
        moved = part + rng.standard_normal(part.size) * (VARIANT_T * norm / np.sqrt(part.size))
        out.append(moved * (norm / np.linalg.norm(moved)))
    return np.concatenate(out).astype("<f4")


async def health(client: Any) -> dict[str, Any]:
    result = await client.call_tool("admin", {"action": "health_check"})
    assert not result.is_error, result.content
    details: dict[str, Any] = (result.structured_content or {}).get("details", {})
    return details


async def wait_for_backfill(client: Any) -> tuple[float, dict[str, Any]]:
    """Seconds until health_check says this process's writes all have their vectors and links."""
    started = time.perf_counter()
    while True:
        details = await health(client)
        if not details.get("vectors_pending"):
            return time.perf_counter() - started, details
        if time.perf_counter() - started > CATCH_UP_DEADLINE_S:
            raise RuntimeError(f"the backfill did not catch up within {CATCH_UP_DEADLINE_S:.0f}s: {details}")
        await anyio.sleep(POLL_S)


def import_payload(n: int) -> str:
    """n memories as a JSON array, one record per line (so an import error names a useful line)."""
    rng = random.Random(21)
    records = [
        json.dumps({"content": text, "domain": "user", "tags": rng.sample(TAGS, 2)}, ensure_ascii=False)
        for text in texts(n, seed=2024)
    ]
    return "[\n" + ",\n".join(records) + "\n]"


class ProgressBar:
    """A one-line text bar on stderr, redrawn by MCP progress notifications."""

    def __init__(self, label: str, width: int = 30) -> None:
        self.label, self.width, self.updates = label, width, 0
        self.tty = sys.stderr.isatty()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates += 1
        self.draw(progress, total, message)

    def draw(self, progress: float, total: float | None, message: str | None = None) -> None:
        if total:
            filled = round(self.width * min(1.0, progress / total))
            bar = "#" * filled + "-" * (self.width - filled)
            text = f"{self.label} [{bar}] {progress:,.0f}/{total:,.0f}"
        else:
            text = f"{self.label} {progress:,.0f}"
        line = f"{text}  {message or ''}".rstrip()
        if self.tty:  # redraw in place
            sys.stderr.write(f"\r{line}\x1b[K")
        else:  # a log file: one line per update
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self, done: float, total: float) -> None:
        self.draw(done, total, "done")
        if self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


async def measure_import(client: Any, n: int) -> dict[str, Any]:
    payload = import_payload(n)
    before = (await health(client)).get("vectors_indexed", 0)
    bar = ProgressBar(f"  import {n:,}")
    bar.draw(0, n)
    started = time.perf_counter()
    result = await client.call_tool(
        "memory_manage", {"action": "import", "import_data": payload}, progress_callback=bar
    )
    imported_s = time.perf_counter() - started
    assert not result.is_error, result.content
    count = (result.structured_content or {}).get("count")
    bar.close(count or 0, n)
    assert count == n, result.structured_content
    catch_up_s, details = await wait_for_backfill(client)
    vectors = details.get("vectors_indexed", 0) - before
    return {
        "records": n,
        "payload_mib": round(len(payload.encode()) / 2**20, 2),
        "import_s": round(imported_s, 2),
        "records_per_s": round(n / imported_s, 1),
        "progress_notifications": bar.updates,
        "embed_catch_up_s": round(catch_up_s, 2),
        "vectors_made": vectors,
        "vectors_per_s": round(vectors / catch_up_s, 1) if catch_up_s > 0 else None,
    }


async def measure(
    db: Path | str, n: int, embedder: str, queries: int, transport: str, import_n: int
) -> dict[str, Any]:
    rng = random.Random(9)
    queries_text = QUERIES
    new_texts = texts(queries + 50, seed=99)
    out: dict[str, Any] = {}
    async with memhub_server(db, transport=transport, embedder=embedder, env=SERVER_ENV) as (client, pid):
        deadline = time.monotonic() + 600
        while True:  # wait for the background warm-up: model loaded, every vector in the index
            details = await health(client)
            warm = details.get("embedder_ready") and details.get("vectors_indexed", 0) >= n
            if embedder == "none" or warm:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"index did not warm up: {details}")
            await anyio.sleep(0.2)
        ids = [f"mem_{rng.randint(1, n)}" for _ in range(queries)]
        store_op: dict[str, Any] = {
            "memory.store": lambda i: (
                "memory",
                {"action": "store", "content": new_texts[i], "domain": "user", "tags": rng.sample(TAGS, 2)},
            ),
        }
        read_ops: dict[str, Any] = {
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
        ops = await time_calls(client, store_op, queries, 1)
        catch_up_s, _ = await wait_for_backfill(client)  # so the searches below do not absorb it
        ops |= await time_calls(client, read_ops, queries, 1)
        out["ops"] = ops
        out["backfill_catch_up_s"] = round(catch_up_s, 2)
        out["server_pid_found"] = pid is not None
        out["rss_mib"] = rss_mib(pid)
        if import_n:
            out["import"] = await measure_import(client, import_n)
            out["import"]["rss_mib"] = rss_mib(pid)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--embedder", default="e5+use", help="the server default (auto) is e5+use")
    parser.add_argument("--transport", choices=TRANSPORTS, default="stdio")
    parser.add_argument(
        "--import-n", type=int, default=2000, help="memories in the bulk-import measurement (0: skip it)"
    )
    parser.add_argument(
        "--seeded",
        help="keep each seeded database in this directory and start every run from a copy of it"
        " (before/after comparisons: the same data, seeded once)",
    )
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="postgresql: each size in a fresh database of a throwaway embedded PostgreSQL 18 + pgvector",
    )
    parser.add_argument("--out", default=str(RESULTS / "assoc_latency.json"))
    args = parser.parse_args()
    if args.backend == "postgresql" and args.seeded:
        parser.error("--seeded keeps SQLite files; with --backend postgresql every run seeds afresh")
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "embedder": args.embedder,
        "transport": args.transport,
        "queries": args.queries,
        "sizes": {},
    }
    for size in [int(x) for x in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            db: Path | str = Path(tmp) / "bench.db"
            if args.backend == "postgresql":
                db = stack.enter_context(embedded_database(Path(tmp) / "pg"))
            print(f"\n{size:,} memories: seeding ({args.backend})", flush=True)
            started = time.perf_counter()
            kept = Path(args.seeded) / f"assoc-{size}-{args.embedder}.db" if args.seeded else None
            if kept is None or not kept.exists():
                seed(db, size, args.embedder)
                if kept is not None:
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(db, kept)
            else:
                shutil.copyfile(kept, db)
            if args.backend == "postgresql":
                report["backend"] = "postgresql"
            seeded = time.perf_counter() - started
            measured = anyio.run(
                measure, db, size, args.embedder, args.queries, args.transport, args.import_n
            )
            report["sizes"][size] = {"seed_s": round(seeded, 1), **measured}
        print(
            f"{size:,} memories (seeded in {seeded:.0f}s), embedder {args.embedder},"
            f" {args.transport}, {args.queries} calls each"
        )
        print_table("", measured["ops"])
        print(f"backfill catch-up after {args.queries} stores: {measured['backfill_catch_up_s']:.2f}s")
        print(format_rss(measured["rss_mib"]))
        if "import" in measured:
            imp = measured["import"]
            print(
                f"import of {imp['records']:,} memories ({imp['payload_mib']} MiB):"
                f" {imp['import_s']:.2f}s, {imp['records_per_s']:,.0f} records/s"
                f" ({imp['progress_notifications']} progress notifications)"
            )
            rate = f"{imp['vectors_per_s']:,.0f}" if imp["vectors_per_s"] is not None else "-"
            print(
                f"embedding catch-up: {imp['embed_catch_up_s']:.2f}s for {imp['vectors_made']:,} vectors,"
                f" {rate} vectors/s"
            )
            print("after import " + format_rss(imp["rss_mib"]))
    write_report(args.out, report)


if __name__ == "__main__":
    main()
