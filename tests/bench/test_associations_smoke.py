"""Smoke test of bench/associations.py: the evaluation runs end to end through the real MCP
client (hash embedder, fast) and writes a well-formed curve. Quality is not asserted here: the
default embedder's numbers are in docs/benchmarks.md."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

from tests.helpers import REPO, run_bench_script

RUN = REPO / "bench" / "associations.py"


def test_evaluate_reports_a_precision_recall_curve(tmp_path: Path) -> None:
    report, output = run_bench_script(tmp_path, RUN, "evaluate", "--embedder", "hash", "--min", "0")
    assert "precision" in output and "unrelated store" in output
    assert report["embedder"].startswith("hash") and report["semantic_min"] == 0.0
    assert report["pairs"]["related"] >= 100 and report["pairs"]["unrelated"] > 3000
    curve = report["curve"]
    assert [p["threshold"] for p in curve] == sorted(p["threshold"] for p in curve)
    assert [p["links"] for p in curve] == sorted((p["links"] for p in curve), reverse=True)
    for point in [*curve, *report["curve_same_fact"]]:
        assert 0.0 <= point["precision"] <= 1.0 and 0.0 <= point["recall"] <= 1.0
    unrelated = report["unrelated_store"]
    assert 0 <= unrelated["related_pairs_depth1"] <= unrelated["possible_pairs"] == 45
    assert unrelated["in_a_session"]["related_pairs_depth1"] >= 9  # the temporal chain at least


def test_labelled_set_is_bilingual_and_every_pair_names_known_memories() -> None:
    data = json.loads((REPO / "bench" / "data" / "assoc_pairs.json").read_text(encoding="utf-8"))
    ids = {m["id"] for m in data["memories"]}
    assert len(ids) == len(data["memories"]) >= 90
    assert {m["lang"] for m in data["memories"]} == {"en", "ja"}
    for pair in data["related_pairs"]:
        assert {pair["a"], pair["b"]} <= ids and pair["a"] != pair["b"]
        assert pair["grade"] in ("same", "topic") and pair["langs"] in ("en", "ja", "cross")
    assert {p["langs"] for p in data["related_pairs"]} == {"en", "ja", "cross"}


def test_the_halves_split_by_topic_and_keep_each_hard_negative_pair_together() -> None:
    module = runpy.run_path(str(RUN), run_name="bench_associations")
    data = json.loads((REPO / "bench" / "data" / "assoc_pairs.json").read_text(encoding="utf-8"))
    halves = {half: module["split"](data, half) for half in ("calibration", "test", "all")}
    cal, test = ({m["id"] for m in halves[h][0]} for h in ("calibration", "test"))
    assert not cal & test and cal | test == {m["id"] for m in data["memories"]}
    topic = {m["id"]: m["topic"] for m in data["memories"]}
    for half in ("calibration", "test"):
        mems, related = halves[half]
        assert len(mems) >= 40 and len(related) >= 50  # each half: well over 200 labelled pairs
        ids = {m["id"] for m in mems}
        # every related pair of its topics is in it: no related pair crosses the halves
        assert related == [p for p in data["related_pairs"] if topic[p["a"]] in {topic[i] for i in ids}]
        assert {p["langs"] for p in related} == {"en", "ja", "cross"}
    for a, b in module["HARD_NEGATIVES"]:
        assert any({a, b} <= {topic[i] for i in ids} for ids in (cal, test))
    assert halves["all"] == (data["memories"], data["related_pairs"])
