"""vault_ls, vault_read, vault_scan and vault_coverage on the sample vault."""

from __future__ import annotations

import pytest

from memhub.services.vault import config as c
from tests.services.vault.conftest import DESIGN, VaultEnv

pytestmark = pytest.mark.anyio


async def test_ls_lists_one_folder_with_sizes(env: VaultEnv) -> None:
    root = await env.ok("vault_ls")
    by_path = {e["path"]: e for e in root["entries"]}
    assert by_path["日記"] == {"path": "日記", "type": "dir", "size_bytes": None}
    assert by_path["README.md"]["type"] == "file"
    assert by_path["README.md"]["size_bytes"] == (env.root / "README.md").stat().st_size
    inner = await env.ok("vault_ls", relative_dir="projects/memhub")
    assert [e["path"] for e in inner["entries"]] == [
        "projects/memhub/Release checklist.md",
        "projects/memhub/diagram.png",
        DESIGN,
        "projects/memhub/運用メモ.md",
    ]
    assert await env.code("vault_ls", relative_dir="nope") == "not_found"
    assert await env.code("vault_ls", relative_dir="README.md") == "invalid_path"


async def test_read_needs_a_range_unless_full(env: VaultEnv) -> None:
    assert await env.code("vault_read", path=DESIGN) == "invalid_parameter"
    assert await env.code("vault_read", path=DESIGN, full=False) == "invalid_parameter"
    whole = await env.ok("vault_read", path=DESIGN, full=True)
    text = (env.root / DESIGN).read_text(encoding="utf-8")
    assert whole["text"] == text.rstrip("\n")
    assert whole["truncated"] is False and whole["truncated_reason"] == "none"
    assert whole["applied_range"] == {"start_line": 1, "end_line": 28}
    assert whole["next_offset"] == {"start_line": None}
    assert whole["returned_chars"] == len(whole["text"])


async def test_read_range_reports_where_to_continue(env: VaultEnv) -> None:
    part = await env.ok("vault_read", path=DESIGN, range={"start_line": 11, "end_line": 13})
    assert part["text"].splitlines()[0] == "## ストレージ"
    assert part["applied_range"] == {"start_line": 11, "end_line": 13}
    assert part["truncated"] is False and part["truncated_reason"] == "range_end"
    assert part["next_offset"] == {"start_line": 14}
    tail = await env.ok("vault_read", path=DESIGN, range={"start_line": 25, "end_line": 500})
    assert tail["applied_range"] == {"start_line": 25, "end_line": 28}
    assert tail["truncated_reason"] == "none" and tail["next_offset"]["start_line"] is None
    open_end = await env.ok("vault_read", path=DESIGN, range={"start_line": 27})
    assert open_end["applied_range"]["end_line"] == 28
    assert await env.code("vault_read", path=DESIGN, range={"start_line": 29}) == "invalid_parameter"
    bad = {"start_line": 5, "end_line": 2}
    assert await env.code("vault_read", path=DESIGN, range=bad) == "invalid_parameter"
    assert await env.code("vault_read", path=DESIGN, range={"start_line": 0}) == "invalid_parameter"
    assert await env.code("vault_read", path="missing.md", full=True) == "not_found"
    assert await env.code("vault_read", path="projects", full=True) == "invalid_path"


async def test_max_chars_and_the_hard_limit_always_apply(env: VaultEnv) -> None:
    cut = await env.ok("vault_read", path=DESIGN, full=True, limits={"max_chars": 60})
    assert cut["truncated"] is True and cut["truncated_reason"] == "max_chars"
    assert cut["returned_chars"] <= 60
    nxt = cut["next_offset"]["start_line"]
    assert nxt == cut["applied_range"]["end_line"] + 1
    rest = await env.ok("vault_read", path=DESIGN, range={"start_line": nxt}, limits={"max_chars": 10_000})
    assert cut["text"] + "\n" + rest["text"] == (env.root / DESIGN).read_text(encoding="utf-8").rstrip("\n")
    one_line = await env.ok(
        "vault_read", path=DESIGN, range={"start_line": 8, "end_line": 8}, limits={"max_chars": 5}
    )
    assert one_line["returned_chars"] == 5 and one_line["truncated_reason"] == "max_chars"
    big = "x" * 300 + "\n"
    (env.root / "big.md").write_text(big * 1_000, encoding="utf-8")  # 301,000 characters
    capped = await env.ok("vault_read", path="big.md", full=True, limits={"max_chars": 10_000_000})
    assert capped["truncated_reason"] == "hard_limit" and capped["returned_chars"] <= c.READ_HARD_LIMIT_CHARS
    default = await env.ok("vault_read", path="big.md", full=True)
    assert default["returned_chars"] <= c.READ_DEFAULT_MAX_CHARS and default["truncated"] is True


async def test_empty_and_crlf_notes(env: VaultEnv) -> None:
    (env.root / "empty.md").write_bytes(b"")
    empty = await env.ok("vault_read", path="empty.md", full=True)
    assert empty["text"] == "" and empty["applied_range"] == {"start_line": 1, "end_line": 0}
    scan = await env.ok("vault_scan", path="empty.md")
    assert scan["eof"] is True and scan["next_cursor"]["start_line"] is None
    coverage = await env.ok("vault_coverage", path="empty.md", cited_ranges=[])
    assert coverage["total_lines"] == 0 and coverage["coverage_ratio"] == 1.0
    (env.root / "crlf.md").write_bytes("一行目\r\n二行目\r\n".encode())
    crlf = await env.ok("vault_read", path="crlf.md", full=True)
    assert crlf["text"] == "一行目\n二行目" and crlf["applied_range"]["end_line"] == 2


async def test_scan_walks_a_note_in_chunks_from_line_one(env: VaultEnv) -> None:
    first = await env.ok("vault_scan", path=DESIGN, chunk_lines=10)
    assert first["applied_range"] == {"start_line": 1, "end_line": 10}
    assert first["eof"] is False and first["truncated_reason"] == "chunk_end"
    assert first["next_actions"] == [
        {"type": "vault_scan", "confidence": 0.9, "params": {"path": DESIGN, "cursor": {"start_line": 11}}}
    ]
    seen = [first["text"]]
    cursor = first["next_cursor"]
    while cursor["start_line"] is not None:
        chunk = await env.ok("vault_scan", path=DESIGN, cursor=cursor, chunk_lines=10)
        seen.append(chunk["text"])
        cursor = chunk["next_cursor"]
    assert chunk["eof"] is True and chunk["truncated_reason"] == "none"
    assert chunk["applied_range"] == {"start_line": 21, "end_line": 28}
    assert chunk["next_actions"][0]["type"] == "vault_coverage"
    assert "\n".join(seen) == (env.root / DESIGN).read_text(encoding="utf-8").rstrip("\n")
    default = await env.ok("vault_scan", path=DESIGN)
    assert default["eof"] is True  # 28 lines < VAULT_SCAN_DEFAULT_CHUNK_LINES


@pytest.mark.parametrize("chunk", [0, -1, c.VAULT_SCAN_MAX_CHUNK_LINES + 1, "10", 1.5])
async def test_scan_chunk_lines_stays_in_range(env: VaultEnv, chunk: object) -> None:
    assert await env.code("vault_scan", path=DESIGN, chunk_lines=chunk) == "invalid_parameter"


async def test_scan_max_chars(env: VaultEnv) -> None:
    cut = await env.ok("vault_scan", path=DESIGN, chunk_lines=28, limits={"max_chars": 80})
    assert cut["truncated"] is True and cut["truncated_reason"] == "max_chars" and cut["eof"] is False
    assert cut["next_cursor"]["start_line"] == cut["applied_range"]["end_line"] + 1
    assert await env.code("vault_scan", path=DESIGN, cursor={"start_line": 99}) == "invalid_parameter"


async def test_coverage_merges_overlapping_and_adjacent_ranges(env: VaultEnv) -> None:
    ranges = [
        {"start_line": 5, "end_line": 8},
        {"start_line": 1, "end_line": 3},
        {"start_line": 4, "end_line": 4},  # adjacent on both sides
        {"start_line": 7, "end_line": 12},  # overlapping
        {"start_line": 20, "end_line": 400},  # past the end: clipped
    ]
    out = await env.ok("vault_coverage", path=DESIGN, cited_ranges=ranges)
    assert out["covered_ranges"] == [{"start_line": 1, "end_line": 12}, {"start_line": 20, "end_line": 28}]
    assert out["uncovered_ranges"] == [{"start_line": 13, "end_line": 19}]
    assert out["total_lines"] == 28 and out["covered_lines"] == 21
    assert out["coverage_ratio"] == round(21 / 28, 4)
    assert out["meets_min_coverage"] is False
    assert out["next_actions"] == [
        {
            "type": "vault_scan",
            "confidence": 0.9,
            "params": {"path": DESIGN, "cursor": {"start_line": 13}, "chunk_lines": 7},
        }
    ]
    full = await env.ok("vault_coverage", path=DESIGN, cited_ranges=[{"start_line": 1, "end_line": 28}])
    assert full["coverage_ratio"] == 1.0 and full["meets_min_coverage"] is True
    assert full["uncovered_ranges"] == [] and full["next_actions"][0]["type"] == "artifact_audit"
    none = await env.ok("vault_coverage", path=DESIGN, cited_ranges=[])
    assert none["coverage_ratio"] == 0.0 and none["uncovered_ranges"] == [{"start_line": 1, "end_line": 28}]
    reversed_range = [{"start_line": 9, "end_line": 2}]
    assert await env.code("vault_coverage", path=DESIGN, cited_ranges=reversed_range) == "invalid_parameter"
    assert await env.code("vault_coverage", path=DESIGN) == "invalid_parameter"


async def test_coverage_threshold_is_exact(env: VaultEnv) -> None:
    (env.root / "ten.md").write_text("".join(f"line {i}\n" for i in range(1, 11)), encoding="utf-8")
    nine = await env.ok("vault_coverage", path="ten.md", cited_ranges=[{"start_line": 1, "end_line": 9}])
    assert nine["coverage_ratio"] == 0.9 and nine["meets_min_coverage"] is (c.COVERAGE_MIN_RATIO <= 0.9)
    eight = await env.ok("vault_coverage", path="ten.md", cited_ranges=[{"start_line": 2, "end_line": 9}])
    assert eight["meets_min_coverage"] is False
