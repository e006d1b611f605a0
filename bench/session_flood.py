"""An `initialize` flood against `memhub serve --transport http`: does the server grow?

    .venv/bin/python bench/session_flood.py [--n 3000] [--out bench/results/session_flood.json]

Starts a server (auth none, embedder none) on a free 127.0.0.1 port, opens one session, reads
its resident memory, then sends `--n` initialize requests that never finish the handshake
(each opens an MCP session) and reads the memory again. Sessions are bounded
(`max_sessions_per_principal`, `max_sessions`): the server closes the least recently used
idle ones, so memory stays flat; without the bound every session lived 30 idle minutes.
Reports the statuses, seconds, VmRSS before and after (MiB) and the open sessions
(`memhub_http_sessions` from /metrics).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import MEMHUB, _answers_200, free_port, rss_mib, write_report

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "b", "version": "0"},
    },
}


def _initialize(base: str) -> int:
    request = urllib.request.Request(
        f"{base}/mcp",
        data=json.dumps(INIT).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _open_sessions(base: str) -> float | None:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("memhub_http_sessions "):
                return float(line.split()[1])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--out", default="bench/results/session_flood.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        command = [MEMHUB, "--db", f"{folder}/m.db", "--user", "bench", "serve", "--transport", "http"]
        command += ["--port", str(port), "--embedder", "none"]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            end = time.monotonic() + 60
            while not _answers_200(f"{base}/health"):
                if proc.poll() is not None or time.monotonic() > end:
                    raise SystemExit("memhub serve did not start")
                time.sleep(0.05)
            _initialize(base)
            before = rss_mib(proc.pid)
            statuses: dict[int, int] = {}
            started = time.monotonic()
            for _ in range(args.n):
                status = _initialize(base)
                statuses[status] = statuses.get(status, 0) + 1
            seconds = time.monotonic() - started
            after = rss_mib(proc.pid)
            report = {
                "n": args.n,
                "statuses": {str(k): v for k, v in sorted(statuses.items())},
                "seconds": round(seconds, 1),
                "rss_before_mib": before,
                "rss_after_mib": after,
                "open_sessions": _open_sessions(base),
            }
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(json.dumps(report, indent=2))
    write_report(args.out, report)


if __name__ == "__main__":
    main()
