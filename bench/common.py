"""Helpers shared by the benchmark scripts.

`memhub_server` starts `memhub serve` over stdio (the MCP client spawns it) or over
streamable HTTP (a subprocess on a free 127.0.0.1 port, waited for on /health) and yields a
connected `mcp.Client` with the server's pid, which `rss_mib` reads /proc/<pid>/status for.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

MEMHUB = str(Path(sys.executable).with_name("memhub"))
RESULTS = Path(__file__).resolve().parent / "results"
TRANSPORTS = ("stdio", "http")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(samples_ms: list[float], digits: int = 2) -> dict[str, float]:
    return {
        "p50_ms": round(pct(samples_ms, 0.5), digits),
        "p95_ms": round(pct(samples_ms, 0.95), digits),
        "mean_ms": round(statistics.fmean(samples_ms), digits),
    }


def print_table(title: str, results: dict[str, dict[str, float]]) -> None:
    print(title)
    print(f"{'operation':<18}{'p50 ms':>9}{'p95 ms':>9}")
    for name, r in results.items():
        print(f"{name:<18}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}")


def write_report(path: str | Path, report: dict[str, Any]) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print(f"\nwritten {out}")


Call = Callable[[int], tuple[str, dict[str, Any]]]  # i -> (tool, arguments)


async def time_calls(
    client: Any, ops: dict[str, Call], n: int, digits: int = 2
) -> dict[str, dict[str, float]]:
    """Round-trip latency of each operation, `n` calls each, through an MCP client."""
    results: dict[str, dict[str, float]] = {}
    for name, make in ops.items():
        samples = []
        for i in range(n):
            tool, arguments = make(i)
            started = time.perf_counter()
            result = await client.call_tool(tool, arguments)
            samples.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
        results[name] = summary(samples, digits)
    return results


# --- the server under test ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def _answers_200(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:  # refused while starting, or an HTTP error status
        return False


async def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, deadline_s: float) -> None:
    """Poll `url` until it answers 200 (bounded); fail early if the server exits."""
    end = time.monotonic() + deadline_s
    while not await anyio.to_thread.run_sync(_answers_200, url):
        if proc.poll() is not None:
            raise RuntimeError(f"memhub exited with {proc.returncode}; log {log}:\n{_tail(log)}")
        if time.monotonic() > end:
            raise RuntimeError(f"{url} did not answer within {deadline_s:.0f}s; log {log}:\n{_tail(log)}")
        await anyio.sleep(0.05)


def find_pid(marker: str) -> int | None:
    """The pid of the (one) other process with `marker` as a command-line argument."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        if marker.encode() in args:
            return int(entry.name)
    return None


def rss_mib(pid: int | None) -> dict[str, float] | None:
    """Resident memory of `pid` now (VmRSS) and at its peak (VmHWM), in MiB; None if unknown."""
    if pid is None:
        return None
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = {}
    for line in status.splitlines():
        key, _, rest = line.partition(":")
        found[key] = rest
    if "VmRSS" not in found or "VmHWM" not in found:
        return None
    return {key: round(int(found[key].split()[0]) / 1024, 1) for key in ("VmRSS", "VmHWM")}  # kB -> MiB


def format_rss(rss: dict[str, float] | None) -> str:
    if not rss:
        return "server RSS: unknown (pid not found)"
    return f"server RSS: {rss['VmRSS']:.1f} MiB (peak VmHWM {rss['VmHWM']:.1f} MiB)"


@asynccontextmanager
async def memhub_server(
    db: Path,
    *,
    transport: str = "stdio",
    embedder: str = "none",
    env: dict[str, str] | None = None,
    log: Path | None = None,
    start_timeout_s: float = 60.0,
) -> AsyncIterator[tuple[Client, int | None]]:
    """`memhub --db DB --user bench --project bench serve` over `transport` (stdio or http),
    with a connected client; yields (client, server pid or None if it was not found).

    stdio: the client spawns the server (its stderr goes to ours); the pid is found by the
    db path on its command line. http: a subprocess on a free port, stderr to `log` (default
    next to the db), ready once GET /health answers 200; terminated on exit.
    """
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
    args = ["--db", str(db), "--user", "bench", "--project", "bench", "serve", "--transport", transport]
    args += ["--embedder", embedder]
    if env is not None and os.environ.get("PYTHONPATH"):  # the server runs the source under test
        env = {"PYTHONPATH": os.environ["PYTHONPATH"], **env}
    if transport == "stdio":
        params = StdioServerParameters(command=MEMHUB, args=args, env=env)
        async with Client(params) as client:
            yield client, find_pid(str(db))
        return
    port = free_port()
    log = log or db.with_name(db.name + ".server.log")
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [MEMHUB, *args, "--host", "127.0.0.1", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**get_default_environment(), **(env or {})},
        )
    try:
        await _wait_http(f"http://127.0.0.1:{port}/health", proc, log, start_timeout_s)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            yield client, proc.pid
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
