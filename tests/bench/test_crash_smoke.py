"""The crash and concurrency script (bench/crash.py) at CI size: a few SIGKILLs of a writing
stdio server, then ~5 s of 4 stdio servers and 1 HTTP server writing one file. Nothing
acknowledged may be lost; doctor, text index and vectors stay consistent (`make crash`: 50 kills,
60 s)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import REPO, run_bench_script


def test_crash_script_loses_nothing(tmp_path: Path) -> None:
    report, output = run_bench_script(
        tmp_path, REPO / "bench" / "crash.py", "--kills", "3", "--duration", "5", "--dir", str(tmp_path / "w")
    )
    assert report["problems"] == [], output
    kill, concurrent = report["kill"], report["concurrent"]
    assert kill["kills"] == 3 and kill["lost"] == 0 and kill["doctor_ok"]
    assert concurrent["lost"] == 0 and concurrent["failed_calls"] == 0 and concurrent["doctor_ok"]
    assert set(concurrent["writers"]) == {"s0", "s1", "s2", "s3", "h0"}
    assert all(count > 0 for count in concurrent["writers"].values()), concurrent
    assert concurrent["items_without_vector_after_restart"] == 0
    assert report["server_tracebacks"] == 0
