"""Prometheus metrics: tool calls (count, latency histogram) and the state of store and embedder."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Gauges = Callable[[], dict[str, float]]  # name -> value, read at scrape time

# The state read at scrape time: its type (a `_total` only ever grows) and HELP text.
STATE: dict[str, tuple[str, str]] = {
    "store_bytes": (
        "gauge",
        "Size of the store in bytes (SQLite: file and WAL; PostgreSQL: pg_database_size).",
    ),
    "embedder_ready": ("gauge", "1 once the embedding model is loaded, else 0."),
    "embedder_queue_depth": ("gauge", "Texts waiting for the embedding model."),
    "vectors_indexed": ("gauge", "Vectors in the in-memory search index."),
    "search_vector_timeouts_total": (
        "counter",
        "Searches answered from text alone because the embedding took too long, since start.",
    ),
    "backfill_embedded_total": ("counter", "Items the background backfill has embedded since start."),
    "backfill_backlog": ("gauge", "Items still waiting for their vector."),
    "http_sessions": ("gauge", "Open MCP sessions over HTTP (streamable-HTTP sessions and SSE streams)."),
    "csp_reports_total": (
        "counter",
        "Content-Security-Policy violations browsers reported to the dashboard since start.",
    ),
}


def _number(value: float) -> str:
    """A sample value without losing digits (`{:g}` would print 1234567 as 1.23457e+06)."""
    return str(int(value)) if value.is_integer() else repr(value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class Metrics:
    calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    buckets: dict[str, list[int]] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    csp_reports: int = 0  # violation reports the dashboard's /ui/csp-report received

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
        for name, value in sorted({"csp_reports_total": float(self.csp_reports), **gauges}.items()):
            kind, help_text = STATE.get(name, ("gauge", f"memhub state: {name.replace('_', ' ')}."))
            lines += [
                f"# HELP memhub_{name} {help_text}",
                f"# TYPE memhub_{name} {kind}",
                f"memhub_{name} {_number(value)}",
            ]
        return "\n".join(lines) + "\n"
