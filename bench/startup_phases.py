"""What `memhub serve` spends before it can answer `initialize`, phase by phase, in one process.

    PYTHONPATH=<checkout>/src .venv/bin/python bench/startup_phases.py [--embedder hash] [--runs 5]

Each run is a fresh interpreter: it imports the MCP SDK (`mcp.server`, the floor), then
`memhub.cli.main` (what the `memhub` command imports), then builds the server as `serve`
does (`build_container` on a new SQLite file: the store opened and migrated, the embedder
made but not loaded, every toolset's state, the MCP server). Printed per phase: the median
wall and CPU seconds (user + system, `resource.getrusage`) over the runs. CPU seconds are
the steadier figure on a shared machine; the MCP SDK's own import is the yardstick.

A checkout without `__pycache__` is compiled at every start when PYTHONDONTWRITEBYTECODE is
set (as in this repository's sandboxes): run `python -m compileall -q src` first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, os, resource, sys, tempfile, time
from pathlib import Path


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


marks = []
t0, c0 = time.perf_counter(), cpu()


def mark(name):
    marks.append((name, time.perf_counter() - t0, cpu() - c0))


import mcp.server  # noqa: E402

mark("import mcp.server")
import memhub.cli.main  # noqa: E402

mark("import memhub.cli.main")
from memhub.cli.container import build_container  # noqa: E402
from memhub.core.settings import Settings  # noqa: E402

home = Path(tempfile.mkdtemp())
settings = Settings(home=home, db=str(home / "x.db"), embedder=sys.argv[1])
container = build_container(settings, check_store=True)
mark("build_container")
container.close()
print(json.dumps(marks))
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    phases: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.runs):
        command = [sys.executable, "-c", CHILD, args.embedder]
        out = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ).stdout
        previous = (0.0, 0.0)
        for name, wall, cpu in json.loads(out.splitlines()[-1]):
            phases.setdefault(name, []).append((wall - previous[0], cpu - previous[1]))
            previous = (wall, cpu)
    print(f"{'phase (median of ' + str(args.runs) + ')':28} {'wall s':>8} {'cpu s':>8}")
    for name, values in phases.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        print(f"{name:28} {wall:8.3f} {cpu:8.3f}")


if __name__ == "__main__":
    main()
