"""Read latency while other processes write to the same store.

    .venv/bin/python bench/concurrent_reads.py [--writers 4] [--calls 200] [--seconds 60]

Seeds a fresh database (one project, topics, memories), then starts `--writers` stdio
server processes that write as fast as they can (add-log and memory store in turn) and one
more stdio server that reads: `get-topics` and `memory(get)`, `--calls` of each. The same
reads are timed first with no writer running. Every process is a real `memhub serve` over
stdio on the same SQLite file, reached through the official MCP client. Prints p50/p95 in
milliseconds and writes bench/results/concurrent_reads.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, memhub_server, print_table, summary, write_report


async def _call(client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def seed(db: Path) -> tuple[int, list[str]]:
    async with memhub_server(db) as (client, _):
        project = (await _call(client, "add-project", name="bench-reads"))["project_id"]
        for i in range(30):
            await _call(client, "add-topic", project_id=project, title=f"topic {i}", description="seed")
        memories = []
        for i in range(30):
            out = await _call(client, "memory", action="store", content=f"seed memory {i}", domain="user")
            memories.append(out["memory"]["id"])
    return project, memories


async def reads(client: Any, project: int, memories: list[str], calls: int) -> dict[str, dict[str, float]]:
    samples: dict[str, list[float]] = {"get-topics": [], "memory(get)": []}
    for i in range(calls):
        for name, tool, arguments in (
            ("get-topics", "get-topics", {"project_id": project, "limit": 10}),
            ("memory(get)", "memory", {"action": "get", "memory_id": memories[i % len(memories)]}),
        ):
            started = time.perf_counter()
            await _call(client, tool, **arguments)
            samples[name].append((time.perf_counter() - started) * 1000)
    return {name: summary(values) for name, values in samples.items()}


async def writer(db: Path, project: int, topic: int, stop: anyio.Event, done: list[int]) -> None:
    async with memhub_server(db) as (client, _):
        i = 0
        while not stop.is_set():
            if i % 2:
                await _call(client, "add-log", topic_id=topic, content=f"concurrent log {i}")
            else:
                await _call(client, "memory", action="store", content=f"concurrent memory {i}", domain="user")
            i += 1
        done.append(i)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--calls", type=int, default=200, help="timed calls of each read")
    parser.add_argument("--seconds", type=float, default=60.0, help="upper bound on the writing phase")
    parser.add_argument("--out", default=str(RESULTS / "concurrent_reads.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "reads.db"
        project, memories = await seed(db)
        async with memhub_server(db) as (reader, _):
            topic_list = await _call(reader, "get-topics", project_id=project, limit=1)
            topic = topic_list["topics"][0]["id"]
            await reads(reader, project, memories, 10)  # warm-up
            quiet = await reads(reader, project, memories, args.calls)
            stop = anyio.Event()
            done: list[int] = []
            async with anyio.create_task_group() as tasks:
                for _ in range(args.writers):
                    tasks.start_soon(writer, db, project, topic, stop, done)
                await anyio.sleep(2.0)  # the writers' servers start (bounded warm-up, not a sync)
                with anyio.fail_after(args.seconds):
                    busy = await reads(reader, project, memories, args.calls)
                stop.set()
    print_table("reads, no writers", quiet)
    print_table(f"\nreads, {args.writers} stdio writers", busy)
    print(f"\nwrites during the busy phase: {sum(done)}")
    write_report(
        args.out,
        {"writers": args.writers, "calls": args.calls, "quiet": quiet, "busy": busy, "writes": sum(done)},
    )


if __name__ == "__main__":
    anyio.run(main)
