"""Smoke test of the latency benchmarks (bench/latency.py, bench/assoc_latency.py) at a tiny
size: they run end to end through the real MCP client, over stdio and over HTTP (a server
subprocess on a free port), and write a well-formed report. Latency is not asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, run_bench_script

BENCH = REPO / "bench"


def run_bench(tmp_path: Path, script: str, *args: str) -> tuple[dict[str, Any], str]:
    return run_bench_script(tmp_path, BENCH / script, *args)


def check_ops(ops: dict[str, dict[str, float]], expected: set[str]) -> None:
    assert set(ops) == expected
    for values in ops.values():
        assert 0 < values["p50_ms"] <= values["p95_ms"]


def check_rss(rss: dict[str, float] | None) -> None:
    assert rss is not None, "the server's pid was not found"
    assert 10 < rss["VmRSS"] <= rss["VmHWM"] < 4096


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_discussion_latency(tmp_path: Path, transport: str) -> None:
    report, output = run_bench(
        tmp_path, "latency.py", "--sizes", "100", "--queries", "3", "--transport", transport
    )
    assert report["transport"] == transport
    size = report["sizes"]["100"]
    check_ops(
        size["ops"],
        {"add-log", "add-decision", "search-topics", "search-decisions", "get-logs", "get-topic-tree"},
    )
    check_rss(size["rss_mib"])
    assert "server RSS:" in output


def test_assoc_latency_over_http_with_import(tmp_path: Path) -> None:
    report, output = run_bench(
        tmp_path,
        "assoc_latency.py",
        *("--sizes", "200", "--queries", "3", "--embedder", "hash"),
        *("--transport", "http", "--import-n", "1000"),
    )
    assert report["transport"] == "http" and report["embedder"] == "hash"
    size = report["sizes"]["200"]
    check_ops(size["ops"], {"memory.store", "memory.search", "search.semantic", "search.tags", "memory.get"})
    assert next(iter(size["ops"])) == "memory.store"  # timed before the backfill wait
    assert size["backfill_catch_up_s"] >= 0
    check_rss(size["rss_mib"])
    imported = size["import"]
    assert imported["records"] == imported["vectors_made"] == 1000
    assert imported["progress_notifications"] >= 1  # the server reports every 1,000 records
    assert imported["import_s"] > 0 and imported["records_per_s"] > 0
    assert imported["embed_catch_up_s"] > 0 and imported["vectors_per_s"] > 0
    check_rss(imported["rss_mib"])
    assert "1,000/1,000" in output and "embedding catch-up" in output


def test_decisions_latency_with_vectors(tmp_path: Path) -> None:
    report, output = run_bench(
        tmp_path, "decisions_bench.py", "--sizes", "100", "--queries", "3", "--embedder", "hash"
    )
    assert report["embedder"] == "hash"
    size = report["sizes"]["100"]
    check_ops(size["ops"], {"search strict", "search balanced", "search audit", "record_decision"})
    assert size["targets"] == 20 and size["embed_s"] >= 0
    check_rss(size["rss_mib"])
    assert "100 decisions on 20 targets" in output


def test_pce_bench(tmp_path: Path) -> None:
    report, _ = run_bench(tmp_path, "pce_bench.py", "--sizes", "200", "--queries", "3", "--embedder", "hash")
    size = report["sizes"]["200"]
    check_ops(size["ops"], {"pce.search", "pce.activate", "pce.boundary", "pce.upsert"})
    check_rss(size["rss_mib"])
