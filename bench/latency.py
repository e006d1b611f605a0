"""Latency of the discussion toolset through the real MCP client, at several sizes.

    .venv/bin/python bench/latency.py --sizes 1000,10000 [--transport stdio|http]

For each size: seed a fresh database with that many log entries (plus topics and decisions,
written in-process through the same service code), start `memhub serve` over stdio (the
client spawns it; the default) or, with `--transport http`, as a subprocess on a free
127.0.0.1 port reached at /mcp (stderr to a log next to the database), then time round trips
of add-log, add-decision, search-topics, search-decisions, get-logs and get-topic-tree.
Prints p50/p95 in milliseconds and the server's resident memory after the timed calls
(VmRSS and peak VmHWM from /proc/<pid>/status, MiB), and writes bench/results/latency.json.
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
from corpus import SUBJECTS_EN, SUBJECTS_JA, texts
from memhub.core.models import Principal
from memhub.services.discussion import models as m
from memhub.services.discussion import service as s
from memhub.store.sqlite import SqliteStore

ACTOR = Principal(id="bench", default_project="bench")


def seed(db: Path, n: int) -> tuple[int, list[int]]:
    """n log entries spread over n/20 topics (a tree) and n/10 decisions, in batches of 1,000 rows."""
    store = SqliteStore(db)
    corpus = texts(n + n // 10)
    with store.transaction(write=True) as tx:
        pid = s.add_project(tx, ACTOR, m.AddProjectInput(name="bench")).project_id
    topics: list[int] = []
    rng = random.Random(3)
    n_topics = max(5, n // 20)
    for start in range(0, n_topics, 1000):
        with store.transaction(write=True) as tx:
            for i in range(start, min(n_topics, start + 1000)):
                parent = rng.choice(topics[-50:]) if topics and rng.random() < 0.6 else None
                title = f"{SUBJECTS_JA[i % len(SUBJECTS_JA)]} / {SUBJECTS_EN[i % len(SUBJECTS_EN)]} #{i}"
                args = m.AddTopicInput(
                    project_id=pid, title=title, description=corpus[i % len(corpus)], parent_topic_id=parent
                )
                topics.append(s.add_topic(tx, ACTOR, args).topic_id)
    for start in range(0, n, 1000):
        with store.transaction(write=True) as tx:
            for i in range(start, min(n, start + 1000)):
                s.add_log(tx, ACTOR, m.AddLogInput(topic_id=topics[i % len(topics)], content=corpus[i]))
                if i % 10 == 0:
                    s.add_decision(
                        tx,
                        ACTOR,
                        m.AddDecisionInput(
                            topic_id=topics[i % len(topics)], decision=corpus[n + i // 10], reason=corpus[i]
                        ),
                    )
    store.close()
    return pid, topics


async def measure(
    db: Path, pid: int, topics: list[int], queries: int, transport: str
) -> tuple[dict[str, dict[str, float]], dict[str, float] | None]:
    rng = random.Random(11)
    keywords = [*SUBJECTS_JA, "sqlite", "retry", "plan mode", "設計", "レビュー", "no-such-word"]
    ops: dict[str, Any] = {
        "add-log": lambda _: (
            "add-log",
            {"topic_id": rng.choice(topics), "content": texts(1, rng.randrange(10**6))[0]},
        ),
        "add-decision": lambda _: (
            "add-decision",
            {"topic_id": rng.choice(topics), "decision": "採用する", "reason": "bench"},
        ),
        "search-topics": lambda _: ("search-topics", {"project_id": pid, "keyword": rng.choice(keywords)}),
        "search-decisions": lambda _: (
            "search-decisions",
            {"project_id": pid, "keyword": rng.choice(keywords)},
        ),
        "get-logs": lambda _: ("get-logs", {"topic_id": rng.choice(topics)}),
        "get-topic-tree": lambda _: (
            "get-topic-tree",
            {"project_id": pid, "topic_id": rng.choice(topics[:50])},
        ),
    }
    async with memhub_server(db, transport=transport, embedder="none") as (client, server_pid):
        for _ in range(20):  # warm up
            await client.call_tool("get-projects", {})
        results = await time_calls(client, ops, queries, 2)
        rss = rss_mib(server_pid)
    return results, rss


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--transport", choices=TRANSPORTS, default="stdio")
    parser.add_argument("--out", default=str(RESULTS / "latency.json"))
    args = parser.parse_args()
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "transport": args.transport, "sizes": {}}
    for size in [int(x) for x in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "bench.db"
            started = time.perf_counter()
            pid, topics = seed(db, size)
            seeded = time.perf_counter() - started
            results, rss = anyio.run(measure, db, pid, topics, args.queries, args.transport)
        report["sizes"][size] = {"seed_s": round(seeded, 1), "ops": results, "rss_mib": rss}
        print(
            f"\n{size:,} log entries ({len(topics):,} topics), seeded in {seeded:.1f}s;"
            f" {args.transport}, {args.queries} calls each"
        )
        print_table("", results)
        print(format_rss(rss))
    write_report(args.out, report)


if __name__ == "__main__":
    main()
