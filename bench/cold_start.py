"""Cold start: spawn `memhub serve --transport stdio` until its `initialize` answer arrives.

    .venv/bin/python bench/cold_start.py --runs 10

Prints the median and the best of N runs (each a fresh process on a fresh database) and the
same for a bare `python -c "import mcp.server"`, the floor set by the MCP SDK's import time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import MEMHUB, RESULTS, write_report

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
    proc.wait(timeout=30)
    assert b'"result"' in line, line
    return elapsed


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
    parser.add_argument("--out", default=str(RESULTS / "cold_start.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        starts = [one_start(Path(tmp) / f"c{i}.db", args.embedder) for i in range(args.runs)]
    imports = [sdk_import() for _ in range(args.runs)]

    def stats(values: list[float]) -> dict[str, float]:
        return {"median": round(statistics.median(values), 3), "best": round(min(values), 3)}

    report = {
        "date": time.strftime("%Y-%m-%d"),
        "embedder": args.embedder,
        "spawn_to_initialize_s": stats(starts),
        "sdk_import_s": stats(imports),
    }
    print(f"spawn -> initialize: {report['spawn_to_initialize_s']} s")
    print(f"python -c 'import mcp.server': {report['sdk_import_s']} s")
    write_report(args.out, report)


if __name__ == "__main__":
    main()
