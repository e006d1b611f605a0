"""Indexing throughput, and searches during a backlog, through the real MCP client.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/indexing.py \\
        [--embedders e5+use,use] [--n 1000] [--backlog 1000] [--searches 40] [--via import|store]

For each embedder, a fresh `memhub serve` (bench/common.py) on a fresh database:

1. Ready: `admin(health_check)` until the model is loaded.
2. Idle search: 200 memories stored and embedded, then `--searches` timed `memory(search)`
   round trips (k=5), each query text new to the server: the idle p50/p95; then the same query
   `--searches` times (its embedding cached: issue 21 §5).
3. Indexing rate: `--n` memories stored at once (`--via import`: `memory_manage(import)`, 1,000
   a call; `--via store`: one `memory(store)` call after the other, which caps the rate at the
   store rate); the clock runs from the first call until `health_check` says no vector is pending
   (polled every 0.1 s): memories/s end to end. The server's own `index_rate` is quoted too.
4. Backlog search: `--backlog` more memories stored, then `--searches` timed searches at once;
   a search counts as "during the backlog" when `health_check` right after it still reports
   vectors pending. p50 during the backlog / idle p50 is the ratio issue 21 bounds by 2.

Writes bench/results/indexing.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from common import RESULTS, memhub_server, rss_mib, summary, write_report
from corpus import SUBJECTS_EN, SUBJECTS_JA, texts

QUERIES = [*SUBJECTS_JA, *SUBJECTS_EN, "retry with backoff", "SQLite WAL mode", "how do we deploy safely"]
READY_TIMEOUT_S = 600.0


def distinct(n: int, skip: int = 0) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for i, text in enumerate(texts(n * 3 + skip * 3 + 100)):
        text = f"{text} (#{i})"  # distinct even where the corpus repeats itself
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out[skip : skip + n]


async def health(client: Any) -> dict[str, Any]:
    result = await client.call_tool("admin", {"action": "health_check"})
    assert not result.is_error, result.content
    return dict((result.structured_content or {}).get("details", {}))


async def until(client: Any, ready: Any, timeout_s: float, every_s: float = 0.1) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        details = await health(client)
        if ready(details):
            return details
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached within {timeout_s:.0f} s: {details}")
        await anyio.sleep(every_s)


async def store_all(client: Any, memories: list[str], via: str = "store") -> float:
    """`memory(store)` one call each, or `memory_manage(import)` 1,000 a call (faster than any
    model here embeds: the clock then measures indexing, not storing)."""
    started = time.perf_counter()
    if via == "import":
        for at in range(0, len(memories), 1000):
            data = json.dumps(
                {"memories": [{"content": t, "domain": "user"} for t in memories[at : at + 1000]]}
            )
            result = await client.call_tool("memory_manage", {"action": "import", "import_data": data})
            assert not result.is_error, result.content
        return time.perf_counter() - started
    for text in memories:
        result = await client.call_tool("memory", {"action": "store", "content": text, "domain": "user"})
        assert not result.is_error, result.content
    return time.perf_counter() - started


async def search(client: Any, query: str) -> tuple[float, str | None]:
    started = time.perf_counter()
    result = await client.call_tool(
        "memory", {"action": "search", "query": query, "limit": 5, "threshold": 0.0}
    )
    elapsed = (time.perf_counter() - started) * 1000
    assert not result.is_error, result.content
    return elapsed, (result.structured_content or {}).get("note")


async def one_embedder(embedder: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memhub-indexing-") as tmp:
        db = Path(tmp) / "m.db"
        env = {"MEMHUB_HOME": str(Path(tmp) / "home"), "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
        if os.environ.get("PYTHONPATH"):  # a worktree's own source, as in the tests
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        async with memhub_server(db, embedder=embedder, env=env, transport=args.transport) as (client, pid):
            await until(client, lambda d: d.get("embedder_ready"), READY_TIMEOUT_S, 0.2)
            pending_zero = lambda d: d.get("vectors_pending") == 0  # noqa: E731
            await store_all(client, distinct(200))
            await until(client, pending_zero, 3600)
            for q in QUERIES[:5]:
                await search(client, q)  # warm up
            # every timed query is new to the server (its query-embedding cache would answer a
            # repeated one without inference): the text carries the phase and the round
            idle = [
                (await search(client, f"{QUERIES[i % len(QUERIES)]} idle{i}"))[0]
                for i in range(args.searches)
            ]
            repeated = [(await search(client, f"{QUERIES[0]} idle0"))[0] for _ in range(args.searches)]

            memories = distinct(args.n, skip=200)
            began = time.perf_counter()
            store_s = await store_all(client, memories, args.via)
            details = await until(client, pending_zero, 3600)
            total_s = time.perf_counter() - began
            rate = {
                "memories": args.n,
                "store_s": round(store_s, 2),
                "all_vectors_s": round(total_s, 2),
                "memories_per_s": round(args.n / total_s, 1),
                "server_index_rate": details.get("index_rate"),
            }
            print(
                f"  {embedder}: {args.n} memories embedded in {total_s:.1f} s: {rate['memories_per_s']}/s",
                flush=True,
            )

            await store_all(client, distinct(args.backlog, skip=200 + args.n), args.via)
            during: list[float] = []
            after: list[float] = []
            notes = 0
            for i in range(args.searches):
                ms, note = await search(client, f"{QUERIES[i % len(QUERIES)]} backlog{i}")
                pending = (await health(client)).get("vectors_pending", 0)
                (during if pending else after).append(ms)
                notes += bool(note and "without vectors" in note)
            await until(client, pending_zero, 3600)
            rss = rss_mib(pid)
    report: dict[str, Any] = {
        "idle_search": summary(idle),
        "repeated_query_search": summary(repeated),  # the same text each time: no inference
        "indexing": rate,
        "server_rss_mib": rss,
    }
    if during:
        report["backlog_search"] = {**summary(during), "n": len(during), "notes_of_pending": notes}
        report["backlog_p50_over_idle_p50"] = round(
            report["backlog_search"]["p50_ms"] / report["idle_search"]["p50_ms"], 2
        )
    report["searches_after_backlog_cleared"] = len(after)
    return report


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedders", default="e5+use,use")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--backlog", type=int, default=1000)
    parser.add_argument("--searches", type=int, default=40)
    parser.add_argument("--transport", default="stdio")
    parser.add_argument(
        "--via", choices=("import", "store"), default="import", help="how memories are stored"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "indexing.json")
    args = parser.parse_args()
    names = [e.strip() for e in args.embedders.split(",") if e.strip()]
    if "none" in names:
        parser.error("--embedders none: that server embeds nothing, so it has no indexing rate")
    load = os.getloadavg()
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "load_average": [round(x, 2) for x in load],
        "cores": os.cpu_count(),
        "embedders": {},
    }
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    for name in names:
        report["embedders"][name] = entry = await one_embedder(name, args)
        idle, backlog = entry["idle_search"], entry.get("backlog_search")
        ratio = entry.get("backlog_p50_over_idle_p50")
        print(
            f"{name}: {entry['indexing']['memories_per_s']} memories/s; search p50 idle {idle['p50_ms']} ms"
            + (f", during a backlog {backlog['p50_ms']} ms (x{ratio}, n={backlog['n']})" if backlog else ""),
            flush=True,
        )
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    write_report(args.out, report)


if __name__ == "__main__":
    anyio.run(main)
