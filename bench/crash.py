"""Crash and concurrency checks: nothing acknowledged is ever lost.

    .venv/bin/python bench/crash.py --kills 50 --duration 60        # make crash
    .venv/bin/python bench/crash.py --kills 3 --duration 5          # the CI-sized run

kill mode: N times, start `memhub serve --transport stdio` on one database file, write through
it (discussion logs and decisions, assoc memories; four requests in flight) and SIGKILL it at a
random moment (from during start-up and migrations to mid-write; with the hash embedder the
vector backfill is writing too). After every kill: every acknowledged write is in the file,
`memhub doctor` passes (SQLite integrity, FTS integrity, audit chain), every item has exactly its
text-index row, no vector points at a missing item.

concurrent mode: 4 stdio servers and 1 streamable HTTP server (`serve --transport http` on
127.0.0.1) write the same file for `--duration` seconds; then the same checks, plus: no call
failed, and after a restart the backfill gives every item its vector.

Loopback only; every loop is bounded by a count or a deadline. Writes a JSON report (--out) and
exits 1 if anything acknowledged was lost or a check failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MEMHUB = str(Path(sys.executable).with_name("memhub"))
RESULTS = Path(__file__).resolve().parent / "results"
USER, PROJECT = "crash", "crash"
MARK = re.compile(r"<m:[a-z0-9-]+>")
IN_FLIGHT = 4
CALL_TIMEOUT_S = 30.0
ENV = {
    "PATH": "/usr/bin:/bin",
    "OMP_NUM_THREADS": "1",
    "OMP_WAIT_POLICY": "PASSIVE",
    "MEMHUB_LOG_LEVEL": "WARNING",
}


class Gone(Exception):
    """The server process is no longer there (killed)."""


class CallFailed(Exception):
    pass


# -- clients -------------------------------------------------------------------------------------


def _args(db: Path, embedder: str, *transport: str) -> list[str]:
    return [
        MEMHUB,
        "--db",
        str(db),
        "--user",
        USER,
        "--project",
        PROJECT,
        "serve",
        "--embedder",
        embedder,
        *transport,
    ]


INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "crash", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _call_message(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def _outcome(reply: dict[str, Any]) -> dict[str, Any]:
    """The structured result of a successful call; CallFailed otherwise."""
    result = reply.get("result")
    if not isinstance(result, dict) or result.get("isError"):
        raise CallFailed(json.dumps(reply)[:500])
    return dict(result.get("structuredContent") or {})


class StdioClient:
    """A raw JSON-RPC client of one stdio server, pipelining requests."""

    def __init__(self, db: Path, embedder: str, stderr: Path) -> None:
        with stderr.open("ab") as err:
            self.proc = subprocess.Popen(
                _args(db, embedder, "--transport", "stdio"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=ENV,
            )
        self.next_id = 1

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise Gone from None

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise Gone
        message: dict[str, Any] = json.loads(line)
        return message

    def initialize(self) -> None:
        self.send(INIT)
        while self.receive().get("id") != 0:
            pass
        self.send(INITIALIZED)

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        self.send(_call_message(request_id, tool, arguments))
        while True:
            reply = self.receive()
            if reply.get("id") == request_id:
                return _outcome(reply)

    def close(self) -> int:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class HttpClient:
    """A raw streamable-HTTP client (one session) of `serve --transport http`."""

    def __init__(self, base: str) -> None:
        self.url = f"{base}/mcp"
        self.session: str | None = None
        self.next_id = 1
        _, headers = self._post(INIT)
        self.session = headers.get("mcp-session-id")
        self._post(INITIALIZED)

    def _post(self, message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self.session:
            headers |= {"mcp-session-id": self.session, "mcp-protocol-version": "2025-06-18"}
        request = urllib.request.Request(
            self.url, data=json.dumps(message).encode(), headers=headers, method="POST"
        )
        with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_S) as response:
            body = response.read().decode()
            got = {k.lower(): v for k, v in response.headers.items()}
        for line in body.splitlines():
            if line.startswith("data: "):
                return dict(json.loads(line[6:])), got
        return (dict(json.loads(body)) if body.strip() else {}), got

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        reply, _ = self._post(_call_message(request_id, tool, arguments))
        return _outcome(reply)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_http(db: Path, embedder: str, stderr: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    with stderr.open("ab") as err:
        proc = subprocess.Popen(
            _args(db, embedder, "--transport", "http", "--host", "127.0.0.1", "--port", str(port)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=ENV,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=1):
                return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP server did not start; see {stderr}") from None
            time.sleep(0.05)


# -- what is written -----------------------------------------------------------------------------


def writes(tag: str, topic_id: int) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(marker, tool, arguments): each write carries a unique marker in its text."""
    for i in range(10**9):
        marker = f"<m:{tag}-{i}>"
        kind = i % 3
        if kind == 0:
            yield (
                marker,
                "add-log",
                {"topic_id": topic_id, "content": f"AI: crash test {marker}\nユーザー: ok"},
            )
        elif kind == 1:
            content = f"SQLite WAL survives a crash {marker}"
            yield (
                marker,
                "memory",
                {"action": "store", "domain": "user", "content": content, "tags": ["crash"]},
            )
        else:
            yield (
                marker,
                "add-decision",
                {"topic_id": topic_id, "decision": f"keep WAL {marker}", "reason": "durable"},
            )


def setup(db: Path, embedder: str, logs: Path) -> int:
    """A project and a topic to write into; returns the topic id."""
    client = StdioClient(db, embedder, logs)
    client.initialize()
    project = client.call("add-project", {"name": "crash"})["project_id"]
    topic = int(client.call("add-topic", {"project_id": project, "title": "crash"})["topic_id"])
    if client.close() != 0:
        raise RuntimeError(f"setup server failed; see {logs}")
    return topic


# -- checks --------------------------------------------------------------------------------------


def stored_markers(db: Path) -> set[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        found: set[str] = set()
        for title, body in conn.execute("SELECT coalesce(title, ''), body FROM items"):
            found.update(MARK.findall(title))
            found.update(MARK.findall(body))
        return found


def consistency(db: Path) -> dict[str, int]:
    """Index and vector consistency, straight from the file: every count must be 0."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        one = lambda sql: int(conn.execute(sql).fetchone()[0])  # noqa: E731
        return {
            "items_without_fts_row": one(
                "SELECT count(*) FROM items i"
                " WHERE NOT EXISTS (SELECT 1 FROM items_fts f WHERE f.rowid = i.id)"
            ),
            "fts_rows_without_item": one(
                "SELECT count(*) FROM items_fts f"
                " WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.id = f.rowid)"
            ),
            "vectors_without_item": one(
                "SELECT count(*) FROM vectors v"
                " WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.id = v.item_id)"
            ),
            "links_without_item": one(
                "SELECT count(*) FROM links l WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.id = l.src)"
                " OR NOT EXISTS (SELECT 1 FROM items i WHERE i.id = l.dst)"
            ),
        }


def items_without_vector(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return int(
            conn.execute(
                "SELECT count(*) FROM items i"
                " WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.item_id = i.id)"
            ).fetchone()[0]
        )


def doctor(db: Path) -> tuple[bool, str]:
    done = subprocess.run(
        [MEMHUB, "--db", str(db), "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**ENV, "MEMHUB_EMBEDDER": "none"},
    )
    return done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def check(db: Path, acked: set[str], problems: list[str], when: str) -> dict[str, Any]:
    lost = sorted(acked - stored_markers(db))
    healthy, report = doctor(db)
    counts = consistency(db)
    if lost:
        problems.append(f"{when}: {len(lost)} acknowledged writes lost, e.g. {lost[:5]}")
    if not healthy:
        problems.append(f"{when}: memhub doctor failed:\n{report}")
    for name, value in counts.items():
        if value:
            problems.append(f"{when}: {name} = {value}")
    return {"lost": len(lost), "doctor_ok": healthy, **counts}


# -- kill mode -----------------------------------------------------------------------------------


def kill_round(
    db: Path, embedder: str, topic: int, round_no: int, rng: random.Random, logs: Path, failed: list[str]
) -> tuple[set[str], str]:
    """One server, written to until SIGKILL lands; the markers it acknowledged and where it died."""
    during_start = rng.random() < 0.25  # start-up opens the file and may migrate it
    client = StdioClient(db, embedder, logs)
    timer = threading.Timer(
        rng.uniform(0.0, 1.0) if during_start else rng.uniform(0.0, 0.8),
        lambda: os.kill(client.proc.pid, signal.SIGKILL),
    )
    if during_start:
        timer.start()
    acked: set[str] = set()
    phase = "start-up"
    try:
        client.initialize()
        phase = "writing"
        if not during_start:
            timer.start()
        pending: dict[int, str] = {}
        source = writes(f"k{round_no}", topic)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            while len(pending) < IN_FLIGHT:
                marker, tool, arguments = next(source)
                pending[client.next_id] = marker
                client.send(_call_message(client.next_id, tool, arguments))
                client.next_id += 1
            reply = client.receive()
            marker_of = pending.pop(reply.get("id"), None)  # type: ignore[arg-type]
            if marker_of is not None:
                _outcome(reply)
                acked.add(marker_of)
    except Gone:
        pass
    except CallFailed as exc:
        failed.append(f"kill round {round_no + 1}: a write failed: {exc}")
    finally:
        timer.cancel()
        if client.proc.poll() is None:
            client.proc.kill()
        client.proc.wait()
    return acked, phase


def kill_mode(
    db: Path, kills: int, embedder: str, seed: int, logs: Path, problems: list[str]
) -> dict[str, Any]:
    rng = random.Random(seed)
    topic = setup(db, embedder, logs)
    acked: set[str] = set()
    phases: dict[str, int] = {}
    started = time.monotonic()
    for round_no in range(kills):
        got, phase = kill_round(db, embedder, topic, round_no, rng, logs, problems)
        acked |= got
        phases[phase] = phases.get(phase, 0) + 1
        check(db, acked, problems, f"after kill {round_no + 1}")
    final = check(db, acked, problems, "kill mode, final")
    return {
        "kills": kills,
        "killed_during": phases,
        "acknowledged_writes": len(acked),
        "seconds": round(time.monotonic() - started, 1),
        **final,
    }


# -- concurrent mode -----------------------------------------------------------------------------


def concurrent_mode(
    db: Path, duration: float, embedder: str, logs: Path, problems: list[str]
) -> dict[str, Any]:
    topic = setup(db, embedder, logs)
    stdio = [StdioClient(db, embedder, logs) for _ in range(4)]
    http_proc, base = _start_http(db, embedder, logs)
    acked: dict[str, set[str]] = {}
    failures: list[str] = []
    lock = threading.Lock()

    def work(name: str, client: StdioClient | HttpClient) -> None:
        mine: set[str] = set()
        deadline = time.monotonic() + duration
        try:
            if isinstance(client, StdioClient):
                client.initialize()
            for n, (marker, tool, arguments) in enumerate(writes(name, topic)):
                if time.monotonic() >= deadline:
                    break
                client.call(tool, arguments)
                mine.add(marker)
                if n % 10 == 9:  # readers contend too
                    client.call(
                        "memory", {"action": "search", "query": "SQLite WAL", "limit": 5, "threshold": 0}
                    )
        except (CallFailed, Gone, OSError, urllib.error.URLError) as exc:
            with lock:
                failures.append(f"{name}: {exc!r}"[:600])
        with lock:
            acked[name] = mine

    threads = [threading.Thread(target=work, args=(f"s{i}", c)) for i, c in enumerate(stdio)]
    threads.append(threading.Thread(target=work, args=("h0", HttpClient(base))))
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(duration + 120)
    elapsed = time.monotonic() - started
    exits = [c.close() for c in stdio]
    http_proc.send_signal(signal.SIGINT)
    try:
        http_proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        http_proc.kill()
        http_proc.wait()
    if any(code != 0 for code in exits):
        problems.append(f"concurrent: stdio servers exited with {exits}")
    problems.extend(f"concurrent: call failed: {f}" for f in failures)
    every = set().union(*acked.values()) if acked else set()
    result = check(db, every, problems, "concurrent mode")
    backlog = _vector_backlog(db, embedder, logs) if embedder != "none" else 0
    if backlog:
        problems.append(f"concurrent: {backlog} items still without a vector after a restart")
    total = sum(len(v) for v in acked.values())
    return {
        "duration_s": round(elapsed, 1),
        "writers": {name: len(v) for name, v in sorted(acked.items())},
        "acknowledged_writes": total,
        "writes_per_s": round(total / max(elapsed, 1e-9), 1),
        "failed_calls": len(failures),
        "items_without_vector_after_restart": backlog,
        **result,
    }


def _vector_backlog(db: Path, embedder: str, logs: Path, wait_s: float = 60) -> int:
    """Start one server and let its backfill run: how many items still lack a vector after `wait_s`."""
    client = StdioClient(db, embedder, logs)
    try:
        client.initialize()
        deadline = time.monotonic() + wait_s
        while (left := items_without_vector(db)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left
    finally:
        client.close()


# -- main ----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=50, help="SIGKILL rounds (0: skip kill mode)")
    parser.add_argument(
        "--duration", type=float, default=60.0, help="seconds of concurrent writing (0: skip)"
    )
    parser.add_argument(
        "--embedder", default="hash", help="embedder of the servers (hash: vectors are written)"
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--dir", help="keep the databases here (default: a temporary directory)")
    parser.add_argument("--out", default=str(RESULTS / "crash.json"))
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="memhub-crash-") as scratch:
        work = Path(args.dir or scratch)
        work.mkdir(parents=True, exist_ok=True)
        logs = work / "servers.log"
        report: dict[str, Any] = {"seed": seed, "embedder": args.embedder}
        if args.kills > 0:
            report["kill"] = kill_mode(work / "kill.db", args.kills, args.embedder, seed, logs, problems)
            print(f"kill mode: {json.dumps(report['kill'])}")
        if args.duration > 0:
            report["concurrent"] = concurrent_mode(
                work / "concurrent.db", args.duration, args.embedder, logs, problems
            )
            print(f"concurrent mode: {json.dumps(report['concurrent'])}")
        tracebacks = logs.read_text(errors="replace").count("Traceback") if logs.exists() else 0
        report["server_tracebacks"] = tracebacks
        report["problems"] = problems
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print(f"written {out}")
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
