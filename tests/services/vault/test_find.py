"""vault_find: Stage 0 (normalised), Stage 1 (loose), Stage 1.5 (integration, next_actions)."""

from __future__ import annotations

from typing import Any

import pytest

from memhub.services.vault import config as c
from tests.services.vault.conftest import DESIGN, VaultEnv

pytestmark = pytest.mark.anyio
OPS = "projects/memhub/運用メモ.md"


def _reads(out: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [
        (a["params"]["path"], a["params"]["range"]["start_line"], a["params"]["range"]["end_line"])
        for a in out["next_actions"]
        if a["type"] == "vault_read"
    ]


async def test_summary_has_every_field_and_omits_cutoff(env: VaultEnv) -> None:
    out = await env.ok("vault_find", query="WAL")
    assert out["trace_id"].startswith("vf_")
    summary = out["summary"]
    assert set(summary) == {
        "scanned_files", "scanned_nodes", "candidates", "warnings", "max_stage_applied", "scope_expanded",
        "integrated_candidates", "signal_coverage", "file_bias_ratio", "gap_ranges_count",
        "sufficiency_score", "integration_status",
    }  # fmt: skip
    assert "cutoff_reason" not in summary
    assert summary["scanned_files"] == 7 and summary["scanned_nodes"] > summary["scanned_files"]
    assert summary["max_stage_applied"] == 1 and summary["scope_expanded"] is False


async def test_stage0_normalised_match_is_ready_and_stops(env: VaultEnv) -> None:
    out = await env.ok("vault_find", query="ＢＥＧＩＮ   immediate")  # full width, case, spaces
    summary = out["summary"]
    assert summary["signal_coverage"]["normalized"] == 1.0
    assert summary["integration_status"] == "ready" and summary["sufficiency_score"] >= c.SUFFICIENCY_MIN
    assert _reads(out) == [(DESIGN, 11, 16)]
    assert out["next_actions"][-1] == {
        "type": "stop",
        "confidence": summary["sufficiency_score"],
        "params": None,
    }


async def test_stage1_finds_japanese_in_other_scripts_and_inflections(env: VaultEnv) -> None:
    apple = await env.ok("vault_find", query="リンゴを保存する方法")  # katakana; the note writes りんご
    assert apple["summary"]["signal_coverage"]["normalized"] == 0.0
    assert apple["summary"]["candidates"] >= 1
    assert _reads(apple)[0][0] == "日記/りんごの保存.md"
    migration = await env.ok("vault_find", query="データベースを移行する")  # note: データベースの移行手順
    assert _reads(migration)[0][0] == "daily/2026-11-20.md"
    english = await env.ok("vault_find", query="deploying releases")  # deployment, release
    assert {p for p, _s, _e in _reads(english)} >= {"projects/memhub/Release checklist.md"}


async def test_file_names_are_found(env: VaultEnv) -> None:
    out = await env.ok("vault_find", query="りんごの保存")
    assert _reads(out)[0] == ("日記/りんごの保存.md", 1, 4)


async def test_gaps_lead_to_a_scan_from_line_one(env: VaultEnv) -> None:
    out = await env.ok("vault_find", query="バックアップ")
    summary = out["summary"]
    assert summary["candidates"] == 2 and summary["integrated_candidates"] == 2
    assert summary["gap_ranges_count"] == 1 and summary["file_bias_ratio"] == 1.0
    assert summary["integration_status"] == "needs_followup"
    assert out["next_actions"][0] == {"type": "vault_scan", "confidence": 0.7, "params": {"path": OPS}}
    assert _reads(out) == [(OPS, 6, 10), (OPS, 16, 20)]
    assert all(a["type"] != "stop" for a in out["next_actions"])


async def test_nothing_found_is_blocked_with_no_actions(env: VaultEnv) -> None:
    out = await env.ok("vault_find", query="quantum chromodynamics")
    assert out["summary"]["integration_status"] == "blocked"
    assert out["summary"]["candidates"] == 0 and out["summary"]["sufficiency_score"] == 0.0
    assert out["next_actions"] == []


async def test_scope_narrows_and_expands_when_empty(env: VaultEnv) -> None:
    scoped = await env.ok("vault_find", query="WAL", scope={"relative_dir": "summaries"})
    assert {p for p, _s, _e in _reads(scoped)} == {"summaries/設計要約.md"}
    assert scoped["summary"]["scope_expanded"] is False and scoped["summary"]["scanned_files"] == 1
    by_glob = await env.ok("vault_find", query="WAL", scope={"glob": "設計方針.md"})
    assert {p for p, _s, _e in _reads(by_glob)} == {DESIGN}
    expanded = await env.ok("vault_find", query="りんご", scope={"relative_dir": "daily"})
    assert expanded["summary"]["scope_expanded"] is True
    assert _reads(expanded)[0][0] == "日記/りんごの保存.md"


async def test_candidate_cap_cuts_off(env: VaultEnv) -> None:
    for i in range(5):
        (env.root / f"cap{i}.md").write_text(f"# cap {i}\n\ncommon word here\n", encoding="utf-8")
    out = await env.ok("vault_find", query="common word", budget={"max_candidates": 3})
    assert out["summary"]["candidates"] == 3 and out["summary"]["cutoff_reason"] == "candidate_cap"


async def test_time_budget_cuts_off_and_suggests_a_retry(env: VaultEnv) -> None:
    for i in range(300):
        (env.root / "many").mkdir(exist_ok=True)
        (env.root / "many" / f"n{i:03}.md").write_text("# n\n\nfiller text\n" * 20, encoding="utf-8")
    out = await env.ok("vault_find", query="filler", budget={"time_ms": 1})
    summary = out["summary"]
    assert summary["cutoff_reason"] == "time_budget"
    assert summary["scanned_files"] < 307 and summary["integration_status"] != "ready"
    retry = out["next_actions"][-1]
    assert retry["type"] == "vault_find" and retry["params"]["budget"] == {"time_ms": 2}


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": ""},
        {"query": "   "},
        {},
        {"query": "x", "budget": {"time_ms": 0}},
        {"query": "x", "budget": {"max_candidates": 0}},
        {"query": "x", "budget": {"max_candidates": c.FIND_MAX_CANDIDATES + 1}},
        {"query": "x", "scope": {"folder": "x"}},
        {"query": 3},
    ],
)
async def test_bad_input_is_invalid_parameter(env: VaultEnv, arguments: dict[str, Any]) -> None:
    assert await env.code("vault_find", **arguments) == "invalid_parameter"


async def test_unreadable_files_are_warnings(env: VaultEnv) -> None:
    (env.root / "binary.md").write_bytes(b"\xff\xfe\x00broken")
    out = await env.ok("vault_find", query="WAL")
    assert out["summary"]["warnings"] == 1
