"""Smoke test of bench/vault_bench.py at a tiny size: it generates a vault, serves it over
stdio through the real MCP client and writes a well-formed report. Latency is not asserted."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import REPO, run_bench_script


def test_vault_bench(tmp_path: Path) -> None:
    report, output = run_bench_script(
        tmp_path, REPO / "bench" / "vault_bench.py", "--notes", "60", "--queries", "3"
    )
    assert report["notes"] == 60 and report["transport"] == "stdio"
    assert set(report["ops"]) == {
        "vault_find",
        "vault_search regex",
        "vault_search plain",
        "vault_search loose",
    }
    for values in report["ops"].values():
        assert 0 < values["p50_ms"] <= values["p95_ms"]
    assert report["warmup"]["note_items"] > 60
    assert "vault_find" in output
