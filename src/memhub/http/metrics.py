"""Prometheus metrics: tool calls (count, latency histogram) and the state of store and embedder."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Gauges = Callable[[], dict[str, float]]  # name -> value, read at scrape time


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class Metrics:
    calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    buckets: dict[str, list[int]] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
        """Called once per tool call (the toolkit's CallObserver)."""
        self.calls[(tool, outcome)] += 1
        counts = self.buckets.setdefault(tool, [0] * len(BUCKETS))
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                counts[i] += 1
        self.sums[tool] += seconds
        self.counts[tool] += 1

    def render(self, gauges: dict[str, float]) -> str:
        lines = [
            "# HELP memhub_tool_calls_total Tool calls by tool and outcome (ok or an error code).",
            "# TYPE memhub_tool_calls_total counter",
        ]
        for (tool, outcome), n in sorted(self.calls.items()):
            lines.append(
                f'memhub_tool_calls_total{{tool="{_escape(tool)}",outcome="{_escape(outcome)}"}} {n}'
            )
        lines += [
            "# HELP memhub_tool_call_seconds Tool call latency inside the server.",
            "# TYPE memhub_tool_call_seconds histogram",
        ]
        for tool in sorted(self.buckets):
            label = _escape(tool)
            for bound, n in zip(BUCKETS, self.buckets[tool], strict=True):
                lines.append(f'memhub_tool_call_seconds_bucket{{tool="{label}",le="{bound}"}} {n}')
            lines.append(f'memhub_tool_call_seconds_bucket{{tool="{label}",le="+Inf"}} {self.counts[tool]}')
            lines.append(f'memhub_tool_call_seconds_sum{{tool="{label}"}} {self.sums[tool]:.6f}')
            lines.append(f'memhub_tool_call_seconds_count{{tool="{label}"}} {self.counts[tool]}')
        for name, value in sorted(gauges.items()):
            lines += [f"# TYPE memhub_{name} gauge", f"memhub_{name} {value:g}"]
        return "\n".join(lines) + "\n"
