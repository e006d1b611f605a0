"""Smoke test of bench/indexing.py (issue 21) and of bench/peers/run.py's paired mode, at a tiny
size, through the real MCP client over stdio: they run end to end and write well-formed
reports. Rates and latencies are not asserted (benchmarks live under bench/)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import REPO, run_bench_script


def test_indexing_bench_reports_a_rate_and_searches(tmp_path: Path) -> None:
    report, output = run_bench_script(
        tmp_path,
        REPO / "bench" / "indexing.py",
        *("--embedders", "hash", "--n", "60", "--backlog", "60", "--searches", "4"),
    )
    entry = report["embedders"]["hash"]
    assert entry["indexing"]["memories"] == 60 and entry["indexing"]["memories_per_s"] > 0
    assert entry["indexing"]["server_index_rate"] > 0  # health_check says how fast it indexes
    assert 0 < entry["idle_search"]["p50_ms"] <= entry["idle_search"]["p95_ms"]
    assert entry["server_rss_mib"] is not None
    assert "memories/s" in output


def test_peers_paired_mode_runs_memhub_without_a_model(tmp_path: Path) -> None:
    """`memhub-none` is ready at once (no model to wait for), and paired mode opens both
    systems together and reports a paired ratio to the first one."""
    report, output = run_bench_script(
        tmp_path,
        REPO / "bench" / "peers" / "run.py",
        *("--paired", "--systems", "memhub-none,memhub-use", "--sizes", "30", "--calls", "4", "--no-locomo"),
    )
    paired = report["paired"]
    assert paired["base"] == "memhub-none" and paired["errors"] == {}
    size = paired["sizes"]["30"]
    assert set(size["search"]) == {"memhub-none", "memhub-use"}
    assert size["search"]["memhub-use"]["paired_ratio_median"] > 0
    assert "paired" in output


def test_peers_paired_mode_resumes_from_kept_stores(tmp_path: Path) -> None:
    """`--workdir`: a second run with the same systems continues from the stores the first
    left (no seeding again), and stores its own timed memories on top."""
    work = tmp_path / "stores"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    args = ("--paired", "--systems", "memhub-none", "--sizes", "20", "--calls", "3", "--no-locomo")
    first, _ = run_bench_script(
        tmp_path / "a", REPO / "bench" / "peers" / "run.py", *args, "--workdir", str(work)
    )
    assert first["paired"]["sizes"]["20"]["stored"] == 23 and "resumed_from" not in first["paired"]
    second, output = run_bench_script(
        tmp_path / "b", REPO / "bench" / "peers" / "run.py", *args, "--workdir", str(work)
    )
    assert second["paired"]["resumed_from"] == 23 and "resuming: 23" in output
    assert second["paired"]["sizes"]["20"]["stored"] == 26  # nothing seeded, 3 timed stores
    assert json.loads((work / "state.json").read_text())["consumed"] == 26


def test_cold_start_bench_times_the_first_search_by_meaning(tmp_path: Path) -> None:
    """bench/cold_start.py --search: a seeded store copied per run, the first search answered
    with the model taking part (no "still loading" note)."""
    report, output = run_bench_script(
        tmp_path, REPO / "bench" / "cold_start.py", "--runs", "2", "--search", "--embedder", "hash"
    )
    runs = report["search_runs"]
    first = runs["spawn_to_first_search_by_meaning_s"]
    assert 0 < runs["spawn_to_initialize_s"]["best"] <= first["best"]
    assert len(runs["searches_sent"]) == 2 and min(runs["searches_sent"]) >= 1
    assert "first search by meaning" in output
