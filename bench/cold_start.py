"""Cold start: spawn `memhub serve --transport stdio` until its `initialize` answer arrives,
and (`--search`) until the answer of a first search that the embedding model took part in.

    .venv/bin/python bench/cold_start.py --runs 10
    .venv/bin/python bench/cold_start.py --runs 10 --search     # + spawn -> first search by meaning

Prints the median and the best of N runs (each a fresh process on a fresh database) and the
same for a bare `python -c "import mcp.server"`, the floor set by the MCP SDK's import time.

`--search`: a store of 30 memories with their vectors is made once (a server that embeds them);
each run copies it, spawns a server on the copy and sends `initialize`, `initialized` and a
`memory(search)` at once, as a client that searches first thing does. The search is "by
meaning" when its result carries no note saying the model is still loading (a search waits up
to 1.5 s for the model, then answers from keyword search alone); a run whose first search was
keyword-only searches again until one is by meaning, and the clock stops there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import MEMHUB, RESULTS, memhub_server, write_report

INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n'
)


def one_start(db: Path, embedder: str) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [MEMHUB, "--db", str(db), "serve", "--transport", "stdio", "--embedder", embedder],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INIT)
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=300)  # exit waits for the model load under way: slow on a busy machine
    assert b'"result"' in line, line
    return elapsed


SEARCH = {"action": "search", "query": "how do we deploy the service", "limit": 5, "threshold": 0.0}
SEED = [
    f"{topic} (note {i})"
    for i, topic in enumerate(
        [
            "Deploys go through Argo CD; the staging sync runs on every merge to main",
            "本番のデプロイは Argo CD で行い、ステージングは main へのマージごとに同期する",
            "Flyway migrations live in db/migration and run before the service starts",
            "Backups: pg_dump every night at 02:00 UTC, kept for 30 days",
            "TypeScript strict mode is on in every package; no implicit any",
            "Webhook signatures are HMAC-SHA256 over the raw body, checked before parsing",
            "Structured logging: JSON lines with a request id on every line",
            "Retries use exponential backoff with jitter, at most five attempts",
            "Kafka topics are partitioned by tenant id",
            "レート制限は API キーごとに毎分 60 回まで",
        ]
        * 3
    )
]


def _env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    return env


async def _seed(db: Path, embedder: str) -> None:
    """A store of `SEED` with every vector made (a server embeds them, then exits)."""
    env = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "MEMHUB_HOME": str(db.parent / "home")}
    async with memhub_server(db, embedder=embedder, env=env) as (client, _pid):
        for text in SEED:
            result = await client.call_tool("memory", {"action": "store", "content": text, "domain": "user"})
            assert not result.is_error, result.content
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            health = await client.call_tool("admin", {"action": "health_check"})
            details = (health.structured_content or {}).get("details", {})
            if details.get("embedder_ready") and details.get("vectors_pending") == 0:
                return
            await asyncio.sleep(0.2)
        raise TimeoutError("the seed store's vectors were not made within 600 s")


def _send(proc: subprocess.Popen[bytes], *messages: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes], request_id: int) -> dict[str, object]:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        message = json.loads(line)
        if message.get("id") == request_id:
            return dict(message)
    raise RuntimeError("the server closed stdout before answering")


def one_search(template: Path, db: Path, embedder: str) -> tuple[float, float, int]:
    """(spawn -> initialize answered, spawn -> first search by meaning answered, searches sent)."""
    shutil.copy(template, db)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [MEMHUB, "--db", str(db), "--user", "bench", "--project", "bench", "serve", "--transport", "stdio",
         "--embedder", embedder],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env(),
    )  # fmt: skip
    try:
        _send(proc, json.loads(INIT), {"jsonrpc": "2.0", "method": "notifications/initialized"})
        sent = 0
        _send(proc, _search(sent := sent + 1))
        initialized = 0.0
        while True:
            if not initialized:
                _answer(proc, 1)
                initialized = time.perf_counter() - started
            answer = _answer(proc, 100 + sent)
            result = answer.get("result")
            assert isinstance(result, dict) and not result.get("isError"), answer
            note = (result.get("structuredContent") or {}).get("note") or ""
            if "loading" not in note:
                return initialized, time.perf_counter() - started, sent
            _send(proc, _search(sent := sent + 1))
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=300)  # exit waits for the model load under way: slow on a busy machine


def _search(n: int) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 100 + n,
        "method": "tools/call",
        "params": {"name": "memory", "arguments": SEARCH},
    }


def sdk_import() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp.server"], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--embedder", default="auto")
    parser.add_argument("--search", action="store_true", help="also spawn -> first search by meaning")
    parser.add_argument("--out", default=str(RESULTS / "cold_start.json"))
    args = parser.parse_args()
    searches: list[tuple[float, float, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        starts = [one_start(Path(tmp) / f"c{i}.db", args.embedder) for i in range(args.runs)]
        if args.search:
            template = Path(tmp) / "seed.db"
            asyncio.run(_seed(template, args.embedder))
            searches = [one_search(template, Path(tmp) / f"s{i}.db", args.embedder) for i in range(args.runs)]
    imports = [sdk_import() for _ in range(args.runs)]

    def stats(values: list[float]) -> dict[str, float]:
        return {"median": round(statistics.median(values), 3), "best": round(min(values), 3)}

    report = {
        "date": time.strftime("%Y-%m-%d"),
        "embedder": args.embedder,
        "spawn_to_initialize_s": stats(starts),
        "sdk_import_s": stats(imports),
    }
    if searches:
        report["search_runs"] = {
            "spawn_to_initialize_s": stats([s[0] for s in searches]),
            "spawn_to_first_search_by_meaning_s": stats([s[1] for s in searches]),
            "searches_sent": [s[2] for s in searches],
        }
        first = report["search_runs"]["spawn_to_first_search_by_meaning_s"]
        print(f"spawn -> first search by meaning: {first} s")
    print(f"spawn -> initialize: {report['spawn_to_initialize_s']} s")
    print(f"python -c 'import mcp.server': {report['sdk_import_s']} s")
    write_report(args.out, report)


if __name__ == "__main__":
    main()
