"""Smoke test of the retrieval-quality harness (bench/quality/run.py): it runs end to end
through the real MCP client and writes a well-formed report. Quality is not asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from tests.helpers import REPO, run_bench_script
from tests.store.backends import Backend

RUN = REPO / "bench" / "quality" / "run.py"
METRICS = ("hit@1", "hit@5", "hit@10", "recall@5", "recall@10", "mrr")


def run_harness(tmp_path: Path, *args: str) -> dict[str, Any]:
    report, output = run_bench_script(tmp_path, RUN, *args)
    assert "best by hit@5" in output and "best by mrr" in output
    return report


def check_metrics(groups: dict[str, dict[str, float]], expected: set[str]) -> None:
    assert expected <= set(groups), sorted(groups)
    for values in groups.values():
        assert values["n"] > 0
        for metric in METRICS:
            assert 0.0 <= values[metric] <= 1.0, (metric, values)
        assert values["hit@1"] <= values["hit@5"] <= values["hit@10"]


def check_report(report: dict[str, Any], expected: set[str]) -> None:
    check_metrics(report["production"], expected)
    assert {"linear@0", "linear@0.5", "linear@1", "rrf", "calibrated@0.5", "production@0.5"} <= set(
        report["sweep"]
    )
    for groups in report["sweep"].values():
        check_metrics(groups, expected)
    for metric in ("hit@5", "mrr"):
        assert report["best"][metric]["config"] in report["sweep"]
    assert report["seconds"]["total"] > 0


def test_locomo_one_conversation_with_hash_embedder(tmp_path: Path) -> None:
    report = run_harness(tmp_path, "--dataset", "locomo", "--embedder", "hash", "--limit-conversations", "1")
    assert report["conversations"] == 1 and report["embedder_id"].startswith("hash")
    assert report["vectors"] == report["memories"] > 0
    assert report["questions"] > 0 and report["headline_group"] == "cats1-4"
    check_report(report, {"all", "cats1-4", "cat1", "cat2", "cat3", "cat4", "cat5"})
    assert 0 <= report["default_threshold"]["mean_results"] <= 10


def test_ja_set_with_bm25_only(tmp_path: Path) -> None:
    report = run_harness(tmp_path, "--dataset", "ja", "--embedder", "none")
    assert report["embedder_id"] is None and report["vectors"] == 0
    assert report["memories"] >= 120 and report["questions"] >= 70
    check_report(report, {"all", "ja", "en", "cross"})
    check_metrics(report["default_threshold"]["groups"], {"all", "ja", "en", "cross"})


def test_ja_set_on_the_backend_under_test(tmp_path: Path, backend: Backend) -> None:
    """`--db` runs the harness on a given database: PostgreSQL's keyword and vector search."""
    args = ("--db", backend.url(tmp_path)) if backend.name == "postgresql" else ()
    report = run_harness(tmp_path, "--dataset", "ja", "--embedder", "hash", *args)
    assert report["backend"] == backend.name
    assert report["vectors"] == report["memories"] >= 120
    check_report(report, {"all", "ja", "en", "cross"})


def test_malformed_locomo_evidence_is_normalised() -> None:
    spec = importlib.util.spec_from_file_location("quality_run", RUN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    turns = {"D8:6", "D9:17", "D11:26", "D30:5", "D1:3"}
    normalize = module.normalize_evidence
    assert normalize(["D8:6; D9:17"], turns) == ["D8:6", "D9:17"]
    assert normalize(["D:11:26", "D30:05"], turns) == ["D11:26", "D30:5"]
    assert normalize(["D1:3 D1:3,D99:1", "D"], turns) == ["D1:3"]
    assert normalize(["D10:19"], turns) == []
