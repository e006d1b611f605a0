"""Read latency while other processes, or this process, write to the same store.

    .venv/bin/python bench/concurrent_reads.py [--writers 4] [--calls 200] [--seconds 60]
        [--hold 1.0] [--hold-calls 20]

Seeds a fresh database (one project, topics, memories), then starts `--writers` stdio
server processes that write as fast as they can (add-log and memory store in turn) and one
more stdio server that reads: `get-topics` and `memory(get)`, `--calls` of each. The same
reads are timed first with no writer running. Every process is a real `memhub serve` over
stdio on the same SQLite file, reached through the official MCP client. Prints p50/p95 in
milliseconds and writes bench/results/concurrent_reads.json.

Then, in this process: a server built by the composition root and reached through the
in-memory MCP client, with a thread that holds a write transaction open `--hold` seconds at a
time, back to back; the same reads, `--hold-calls` of each, are timed while it does (a read
that waits for the writer takes up to `--hold` seconds). The stdio servers run the code on
this process's PYTHONPATH, so a checkout can be measured against another one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mcp import Client

from common import RESULTS, memhub_server, print_table, summary, write_report
from memhub.cli.container import build_container
from memhub.core.settings import Settings

# the servers run the code under test (a checkout given on PYTHONPATH), not the installed one
SERVER_ENV = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else None


async def _call(client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def seed(db: Path) -> tuple[int, list[str]]:
    async with memhub_server(db, env=SERVER_ENV) as (client, _):
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


async def writer(
    db: Path, project: int, topic: int, stop: anyio.Event, done: list[int], writing: list[int]
) -> None:
    async with memhub_server(db, env=SERVER_ENV) as (client, _):
        i = 0
        while not stop.is_set():
            if i == 1:
                writing.append(1)  # this writer's server is up and has written
            if i % 2:
                await _call(client, "add-log", topic_id=topic, content=f"concurrent log {i}")
            else:
                await _call(client, "memory", action="store", content=f"concurrent memory {i}", domain="user")
            i += 1
        done.append(i)


async def in_process(home: Path, calls: int, hold: float) -> dict[str, Any]:
    """Reads through one server while a thread of the same process holds write transactions."""
    container = build_container(Settings(home=home, user="bench", project="bench", embedder="none"))
    try:
        async with Client(container.server) as client:
            project = (await _call(client, "add-project", name="bench-reads"))["project_id"]
            await _call(client, "add-topic", project_id=project, title="topic", description="seed")
            memories = [
                (await _call(client, "memory", action="store", content=f"seed {i}", domain="user"))["memory"][
                    "id"
                ]
                for i in range(10)
            ]
            await reads(client, project, memories, 5)  # warm-up
            quiet = await reads(client, project, memories, calls)
            stop = threading.Event()
            held = [0]

            def hold_writes() -> None:
                while not stop.is_set():
                    with container.runtime.store.transaction(write=True):
                        held[0] += 1
                        stop.wait(hold)

            writer = threading.Thread(target=hold_writes)
            writer.start()
            try:
                busy = await reads(client, project, memories, calls)
            finally:
                stop.set()
                writer.join()
    finally:
        container.close()
    return {"quiet": quiet, "busy": busy, "write_transactions": held[0]}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--calls", type=int, default=200, help="timed calls of each read")
    parser.add_argument("--seconds", type=float, default=60.0, help="upper bound on the writing phase")
    parser.add_argument("--hold", type=float, default=1.0, help="seconds an in-process write holds")
    parser.add_argument("--hold-calls", type=int, default=20, help="timed in-process calls of each read")
    parser.add_argument("--out", default=str(RESULTS / "concurrent_reads.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "reads.db"
        project, memories = await seed(db)
        async with memhub_server(db, env=SERVER_ENV) as (reader, _):
            topic_list = await _call(reader, "get-topics", project_id=project, limit=1)
            topic = topic_list["topics"][0]["id"]
            await reads(reader, project, memories, 10)  # warm-up
            quiet = await reads(reader, project, memories, args.calls)
            stop = anyio.Event()
            done: list[int] = []
            writing: list[int] = []
            async with anyio.create_task_group() as tasks:
                for _ in range(args.writers):
                    tasks.start_soon(writer, db, project, topic, stop, done, writing)
                with anyio.fail_after(args.seconds):  # until every writer's server is writing
                    while len(writing) < args.writers:
                        await anyio.sleep(0.05)
                with anyio.fail_after(args.seconds):
                    busy = await reads(reader, project, memories, args.calls)
                stop.set()
    print_table("reads, no writers", quiet)
    print_table(f"\nreads, {args.writers} stdio writers", busy)
    print(f"\nwrites during the busy phase: {sum(done)}")
    with tempfile.TemporaryDirectory() as tmp:
        local = await in_process(Path(tmp), args.hold_calls, args.hold)
    print_table("\nin process, no writer", local["quiet"])
    print_table(f"\nin process, a write transaction held {args.hold:g} s at a time", local["busy"])
    write_report(
        args.out,
        {
            "writers": args.writers,
            "calls": args.calls,
            "quiet": quiet,
            "busy": busy,
            "writes": sum(done),
            "in_process": {"hold_s": args.hold, "calls": args.hold_calls, **local},
        },
    )


if __name__ == "__main__":
    anyio.run(main)
