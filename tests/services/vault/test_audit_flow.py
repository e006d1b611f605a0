"""artifact_audit on real-looking artifacts, and the whole find -> scan -> coverage -> audit flow."""

from __future__ import annotations

from typing import Any

import pytest

from tests.services.vault.conftest import DESIGN, SUMMARY, VaultEnv

pytestmark = pytest.mark.anyio
OPS = "projects/memhub/運用メモ.md"


async def _audit(env: VaultEnv, artifact: str, text: str, **extra: Any) -> dict[str, Any]:
    (env.root / artifact).parent.mkdir(parents=True, exist_ok=True)
    (env.root / artifact).write_text(text, encoding="utf-8")
    return await env.ok("artifact_audit", artifact_path=artifact, source_path=DESIGN, **extra)


async def test_the_sample_summary_is_rooted_and_stops(env: VaultEnv) -> None:
    out = await env.ok("artifact_audit", artifact_path=SUMMARY, source_path=DESIGN)
    assert out == {
        "artifact_path": SUMMARY, "source_path": DESIGN, "rootless_nodes": 0, "orphan_branches": 0,
        "one_way_refs": 0, "coverage_ratio": 1.0, "uncovered_ranges_count": 0, "marginal_gain": 0.0,
        "needs_forced_full_scan": False, "findings": [],
        "next_actions": [{"type": "stop", "confidence": 1.0, "params": None}],
    }  # fmt: skip


async def test_rootless_nodes(env: VaultEnv) -> None:
    out = await _audit(
        env,
        "a/rootless.md",
        "# 要約\n\n- SQLite の WAL モードを使う\n- 量子コンピュータで高速化する\n- FTS5 を使う (L900)\n",
        cited_ranges=[{"start_line": 1, "end_line": 28}],
    )
    assert out["rootless_nodes"] == 2 and out["orphan_branches"] == 0
    assert [(f["kind"], f["node_id"]) for f in out["findings"]] == [
        ("rootless_node", "L4"),
        ("rootless_node", "L5"),
    ]
    assert "outside the source" in out["findings"][1]["message"]
    assert out["needs_forced_full_scan"] is True
    assert out["next_actions"] == [
        {
            "type": "artifact_audit",
            "confidence": 0.6,
            "params": {"artifact_path": "a/rootless.md", "source_path": DESIGN},
        }
    ]


async def test_orphan_branch_counts_the_outermost_only(env: VaultEnv) -> None:
    text = (
        "# 要約\n\n- ストレージは SQLite (L13)\n\n## 今後の計画\n\n"
        "- 量子暗号を導入する\n  - 量子鍵配送の実験\n- 宇宙データセンターへ移す\n"
    )
    out = await _audit(env, "a/orphan.md", text, cited_ranges=[{"start_line": 1, "end_line": 28}])
    assert out["orphan_branches"] == 1 and out["rootless_nodes"] == 3
    orphan = [f for f in out["findings"] if f["kind"] == "orphan_branch"]
    assert orphan[0]["node_id"] == "L5" and "今後の計画" in orphan[0]["message"]


async def test_heading_links_into_the_source_root_a_node(env: VaultEnv) -> None:
    text = "# 要約\n\n- 詳細は [[設計方針#ストレージ]] を参照\n- 別の話 [[設計方針#存在しない節]]\n"
    out = await _audit(env, "a/anchors.md", text, cited_ranges=[{"start_line": 1, "end_line": 28}])
    assert out["rootless_nodes"] == 1 and out["one_way_refs"] == 1
    ref = next(f for f in out["findings"] if f["kind"] == "one_way_ref")
    assert ref["node_id"] == "L4" and "no such heading" in ref["message"]


async def test_one_way_refs(env: VaultEnv) -> None:
    (env.root / "a").mkdir()
    (env.root / "a/backlinked.md").write_text("# B\n\nsee [[refs]]\n", encoding="utf-8")
    text = (
        "---\nsource_lines: 1-28\n---\n# Refs\n\n"
        "- SQLite と WAL (L13) [[Release checklist]]\n"  # exists, does not link back
        "- FTS5 で全文検索 (L19) [[存在しないノート]]\n"  # does not exist
        "- パスはルートの外に出ない (L25) [[backlinked]] ![[diagram.png]] [[設計方針]]\n"  # fine
        "- [md link](../projects/memhub/運用メモ.md) (L8)\n"  # exists, no link back
    )
    out = await _audit(env, "a/refs.md", text)
    refs = [f["message"] for f in out["findings"] if f["kind"] == "one_way_ref"]
    assert out["one_way_refs"] == 3, refs
    assert any("does not exist" in r for r in refs)
    assert sum("does not link back" in r for r in refs) == 2
    assert out["rootless_nodes"] == 0 and out["needs_forced_full_scan"] is True


async def test_cited_ranges_come_from_the_artifact_when_not_given(env: VaultEnv) -> None:
    text = "# 要約\n\n- WAL を使う (L11-L16)\n- 全文検索は FTS5 (lines 17-22)\n"
    out = await _audit(env, "a/cites.md", text)
    assert out["coverage_ratio"] == round(12 / 28, 4) and out["uncovered_ranges_count"] == 2
    assert out["needs_forced_full_scan"] is True
    scan = out["next_actions"][0]
    assert scan == {
        "type": "vault_scan",
        "confidence": 0.8,
        "params": {"path": DESIGN, "cursor": {"start_line": 1}, "chunk_lines": 10},
    }
    given = await env.ok(
        "artifact_audit", artifact_path="a/cites.md", source_path=DESIGN,
        cited_ranges=[{"start_line": 1, "end_line": 28}],
    )  # fmt: skip
    assert given["coverage_ratio"] == 1.0 and given["needs_forced_full_scan"] is False


async def test_no_citations_at_all(env: VaultEnv) -> None:
    out = await _audit(env, "a/bare.md", "# 要約\n\n- SQLite の WAL モードを使う\n")
    assert out["coverage_ratio"] is None and out["marginal_gain"] is None
    assert out["uncovered_ranges_count"] == 1 and out["needs_forced_full_scan"] is True
    assert out["rootless_nodes"] == 0  # grounded in the source text


async def test_marginal_gain_forces_a_scan_above_the_coverage_threshold(env: VaultEnv) -> None:
    text = "---\nsource_lines: 1-26\n---\n# 要約\n\n- WAL を使う (L13)\n"
    out = await _audit(env, "a/gain.md", text)
    assert out["coverage_ratio"] == round(26 / 28, 4)  # above COVERAGE_MIN_RATIO
    assert out["marginal_gain"] is not None and out["marginal_gain"] >= 0.05  # line 28 is still unread
    assert out["needs_forced_full_scan"] is True
    assert out["next_actions"][0]["params"]["cursor"] == {"start_line": 27}


async def test_missing_files(env: VaultEnv) -> None:
    assert await env.code("artifact_audit", artifact_path="nope.md", source_path=DESIGN) == "not_found"
    assert await env.code("artifact_audit", artifact_path=SUMMARY, source_path="nope.md") == "not_found"
    assert await env.code("artifact_audit", artifact_path=SUMMARY) == "invalid_parameter"


async def _follow(env: VaultEnv, action: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Call the tool a next_action names, with its params and what the agent adds."""
    return await env.ok(action["type"], **{**(action["params"] or {}), **extra})


async def test_find_scan_coverage_audit_flow_ends_in_stop(env: VaultEnv) -> None:
    found = await env.ok("vault_find", query="バックアップ")
    assert found["summary"]["integration_status"] == "needs_followup"
    action = found["next_actions"][0]
    assert action["type"] == "vault_scan" and action["params"] == {"path": OPS}

    scanned: list[dict[str, int]] = []
    chunk = await _follow(env, action, chunk_lines=10)
    assert chunk["applied_range"]["start_line"] == 1  # the first pass starts at line 1
    while True:
        scanned.append(chunk["applied_range"])
        action = chunk["next_actions"][0]
        if action["type"] != "vault_scan":
            break
        chunk = await _follow(env, action, chunk_lines=10)
    assert chunk["eof"] is True and action["type"] == "vault_coverage"

    # the agent first cites only the backup sections: coverage says what is still uncovered
    partial = await _follow(env, action, cited_ranges=[{"start_line": 6, "end_line": 10}])
    assert partial["meets_min_coverage"] is False
    rescan = partial["next_actions"][0]
    assert rescan["type"] == "vault_scan" and rescan["params"]["cursor"] == {"start_line": 1}
    second = await _follow(env, partial["next_actions"][0])  # a later pass: the uncovered range
    assert second["applied_range"] == {"start_line": 1, "end_line": 5}

    coverage = await _follow(env, action, cited_ranges=scanned)
    assert coverage["meets_min_coverage"] is True and coverage["coverage_ratio"] == 1.0
    audit_action = coverage["next_actions"][0]
    assert audit_action == {"type": "artifact_audit", "confidence": 0.8, "params": {"source_path": OPS}}

    draft = (
        "---\nsource_lines: 1-24\n---\n# 運用要約\n\n"
        "- 毎晩データベースのバックアップを取り 14 日間保持する (L8-L9)\n"
        "- /health と /metrics を監視する (L13)\n"
        "- 障害時はバックアップから restore する (L18-L19)\n"
        "- Kubernetes へ移行する\n"
    )
    await env.ok("vault_create", path="summaries/運用要約.md", content=draft)
    first = await _follow(env, audit_action, artifact_path="summaries/運用要約.md")
    assert first["rootless_nodes"] == 1 and first["needs_forced_full_scan"] is True
    assert [f["node_id"] for f in first["findings"]] == ["L9"]

    fix = "- upgrade のあとに memhub doctor を実行する (L24)"
    await env.ok("vault_replace", path="summaries/運用要約.md", find="- Kubernetes へ移行する", replace=fix)
    final = await _follow(env, first["next_actions"][-1])
    assert final["needs_forced_full_scan"] is False and final["findings"] == []
    assert final["next_actions"] == [{"type": "stop", "confidence": 1.0, "params": None}]
