"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MEMHUB = str(Path(sys.executable).with_name("memhub"))
RESULTS = Path(__file__).resolve().parent / "results"


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
