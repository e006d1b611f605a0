"""Shared-service load (seed 003 §5.1): 50 streamable-HTTP clients and 100 SSE clients at once.

    .venv/bin/python bench/load.py [--http-clients 50] [--sse-clients 100] [--seconds 60]
        [--think-ms 1000] [--embedder hash] [--db sqlite|postgres|URL] [--replicas 1]

Starts `--replicas` real `memhub serve --transport http,sse` processes on one store (a SQLite
file, or PostgreSQL: bench/databases.py), each with its HTTP and SSE listeners on two
127.0.0.1 ports, spreads the clients over them (client i to replica i mod N, as a balancer
with sticky sessions would), connects every client through the official MCP client, and has each one loop
for `--seconds`: store a memory, search memories, add a discussion log, search topics (the
reads and writes of both toolsets), waiting `--think-ms` after each call (an agent thinks
between calls; 0 fires back to back). Every call is bounded (30 s) and every loop is bounded
in count and time. Afterwards the database must hold exactly the writes that were answered
ok (zero lost writes) and no call may have failed (zero errors). Prints p50/p95 per transport
and operation against the seed's limits (HTTP store < 600 ms, search < 300 ms; SSE store
< 800 ms, search < 400 ms) and writes bench/results/load.json.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, ClientSession
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MEMHUB, RESULTS, free_port, summary, write_report
from databases import bench_store, count_items

LIMITS_MS = {"http": {"store": 600, "search": 300}, "sse": {"store": 800, "search": 400}}
CALL_TIMEOUT_S = 30.0
MAX_ROUNDS = 10_000  # per client, whatever the duration
FAILURES = (OSError, RuntimeError, TimeoutError, MCPError, ExceptionGroup)
WORDS = ["deploy", "cache", "schema", "index", "latency", "rollback", "queue", "review", "budget", "token"]


class Tally:
    def __init__(self) -> None:
        self.samples: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.stored: dict[str, int] = defaultdict(int)  # kind -> writes answered ok


async def _call(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(CALL_TIMEOUT_S):
        result = await client.call_tool(tool, arguments)
    if result.is_error or not isinstance(result.structured_content, dict):
        raise RuntimeError(f"{tool}: {str(result.content)[:200]}")
    return result.structured_content


async def session_loop(
    client: Any, transport: str, index: int, args: argparse.Namespace, start: anyio.Event, tally: Tally
) -> None:
    rng = random.Random(index)
    project = (await _call(client, "add-project", {"name": f"load-{transport}-{index}"}))["project_id"]
    topic = (await _call(client, "add-topic", {"project_id": project, "title": f"topic {index}"}))["topic_id"]
    await start.wait()
    deadline = time.monotonic() + args.seconds
    for round_no in range(MAX_ROUNDS):
        if time.monotonic() >= deadline:
            return
        words = " ".join(rng.sample(WORDS, 3))
        ops = (
            (
                "store",
                "memory",
                "memory",
                {"action": "store", "content": f"{index}.{round_no} {words}", "domain": "user"},
            ),
            ("search", "", "memory", {"action": "search", "query": words, "limit": 5}),
            ("store", "log", "add-log", {"topic_id": topic, "content": f"AI: {words} {round_no}"}),
            ("search", "", "search-topics", {"project_id": project, "keyword": "topic"}),
        )
        for label, kind, tool, arguments in ops:
            started = time.perf_counter()
            try:
                await _call(client, tool, arguments)
            except FAILURES as exc:
                tally.errors.append(f"{transport} {tool}: {exc}"[:300])
                continue
            tally.samples[(transport, label)].append((time.perf_counter() - started) * 1000)
            if kind:
                tally.stored[kind] += 1
            if args.think_ms:
                await anyio.sleep(rng.uniform(0.5, 1.5) * args.think_ms / 1000)


async def http_client(
    url: str, index: int, args: argparse.Namespace, start: anyio.Event, tally: Tally
) -> None:
    try:
        async with Client(url) as client:
            await session_loop(client, "http", index, args, start, tally)
    except FAILURES as exc:
        tally.errors.append(f"http client {index}: {exc}"[:300])


async def sse_session(
    url: str, index: int, args: argparse.Namespace, start: anyio.Event, tally: Tally
) -> None:
    try:
        async with (
            sse_client(url, timeout=30, sse_read_timeout=args.seconds + 120) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session_loop(session, "sse", index, args, start, tally)
    except FAILURES as exc:
        tally.errors.append(f"sse client {index}: {exc}"[:300])


def _wait_health(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(url)


async def run(args: argparse.Namespace, home: Path, db: str) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MEMHUB_BACKUP_TIME": ""}
    log = (home / "server.log").open("wb")
    replicas: list[tuple[int, int, subprocess.Popen[bytes]]] = []
    for _ in range(args.replicas):
        http_port, sse_port = free_port(), free_port()
        command = [MEMHUB, "--home", str(home), "--db", db, "--user", "load", "--project", "load", "serve"]
        command += ["--transport", "http,sse", "--host", "127.0.0.1", "--embedder", args.embedder]
        command += ["--http-port", str(http_port), "--sse-port", str(sse_port)]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=env)
        replicas.append((http_port, sse_port, proc))
    tally = Tally()
    try:
        for http_port, _, proc in replicas:
            _wait_health(f"http://127.0.0.1:{http_port}/health", proc)
        start = anyio.Event()
        started = time.monotonic()
        async with anyio.create_task_group() as tasks:
            for i in range(args.http_clients):
                port = replicas[i % len(replicas)][0]
                tasks.start_soon(http_client, f"http://127.0.0.1:{port}/mcp", i, args, start, tally)
            for i in range(args.sse_clients):
                port = replicas[i % len(replicas)][1]
                tasks.start_soon(sse_session, f"http://127.0.0.1:{port}/sse", i, args, start, tally)
            await anyio.sleep(
                min(30.0, 2.0 + 0.1 * (args.http_clients + args.sse_clients))
            )  # connect, set up
            start.set()
        elapsed = time.monotonic() - started
    finally:
        for _, _, proc in replicas:
            proc.terminate()
        for _, _, proc in replicas:
            proc.wait(timeout=30)
        log.close()
    server_log = (home / "server.log").read_text(encoding="utf-8", errors="replace")
    in_db = count_items(db, ("memory", "log"))
    ops: dict[str, dict[str, Any]] = {}
    for (transport, label), values in sorted(tally.samples.items()):
        ops[f"{transport} {label}"] = {
            **summary(values),
            "calls": len(values),
            "limit_ms": LIMITS_MS[transport][label],
            "p95_within_limit": summary(values)["p95_ms"] < LIMITS_MS[transport][label],
        }
    return {
        "http_clients": args.http_clients,
        "sse_clients": args.sse_clients,
        "seconds": args.seconds,
        "think_ms": args.think_ms,
        "embedder": args.embedder,
        "store": "sqlite" if "://" not in db else db.partition("://")[0],
        "replicas": args.replicas,
        "wall_s": round(elapsed, 1),
        "ops": ops,
        "errors": len(tally.errors),
        "error_samples": tally.errors[:10],
        "server_log_tail": server_log[-3000:] if tally.errors else "",
        "writes_ok": dict(tally.stored),
        "writes_in_db": in_db,
        "lost_writes": sum(tally.stored.values()) - sum(in_db.values()),
        "cpus": os.cpu_count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--http-clients", type=int, default=50)
    parser.add_argument("--sse-clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--think-ms", type=float, default=1000.0)
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--db", default="sqlite", help="sqlite, postgres (a throwaway server) or a store URL")
    parser.add_argument("--replicas", type=int, default=1, help="memhub serve processes on the one store")
    parser.add_argument("--out", default=str(RESULTS / "load.json"))
    args = parser.parse_args()
    args.seconds = min(args.seconds, 600.0)  # bounded whatever is asked
    args.replicas = max(1, min(args.replicas, 8))
    with tempfile.TemporaryDirectory() as tmp, bench_store(args.db, Path(tmp)) as db:
        report = anyio.run(run, args, Path(tmp), db)
    print(f"{'operation':<14}{'calls':>8}{'p50 ms':>9}{'p95 ms':>9}{'limit':>8}")
    for name, r in report["ops"].items():
        print(f"{name:<14}{r['calls']:>8}{r['p50_ms']:>9.1f}{r['p95_ms']:>9.1f}{r['limit_ms']:>8}")
    lost = report["lost_writes"]
    print(f"errors {report['errors']}, lost writes {lost} ({report['writes_in_db']} in the store)")
    write_report(args.out, report)
    return 0 if report["errors"] == 0 and report["lost_writes"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
