"""vault_search: plain, regex (bounded in time, invalid patterns fall back) and loose modes."""

from __future__ import annotations

import time

import anyio
import pytest

from memhub.services.vault import config as c
from tests.services.vault.conftest import DESIGN, VaultEnv

pytestmark = pytest.mark.anyio


async def test_regex_is_the_default_mode(env: VaultEnv) -> None:
    out = await env.ok("vault_search", query=r"FTS\d の porter unicode6\d")
    assert out["mode"] == "regex" and out["warnings"] == [] and out["truncated"] is False
    assert out["results"] == [
        {"path": DESIGN, "snippet": "全文検索は FTS5 の porter unicode61 を使う。", "line": 19}
    ]
    anchored = await env.ok("vault_search", query=r"^- .*make check")
    assert [(r["path"], r["line"]) for r in anchored["results"]] == [
        ("projects/memhub/Release checklist.md", 3)
    ]


async def test_an_invalid_pattern_falls_back_to_plain_and_says_so(env: VaultEnv) -> None:
    out = await env.ok("vault_search", query="[[設計方針")
    assert out["mode"] == "plain"
    assert out["warnings"] and "plain" in out["warnings"][0]
    assert {r["path"] for r in out["results"]} == {
        "projects/memhub/Release checklist.md",
        "summaries/設計要約.md",
    }


async def test_plain_is_case_and_width_insensitive(env: VaultEnv) -> None:
    out = await env.ok("vault_search", query="ｓｑｌｉｔｅ", mode="plain")  # full-width letters
    assert {(r["path"], r["line"]) for r in out["results"]} == {(DESIGN, 13), ("summaries/設計要約.md", 7)}
    assert (await env.ok("vault_search", query="(L13", mode="plain"))["results"][0]["line"] == 7


async def test_loose_finds_other_scripts_and_inflections(env: VaultEnv) -> None:
    out = await env.ok("vault_search", query="リンゴを保存する", mode="loose")
    assert out["results"][0]["path"] == "日記/りんごの保存.md"
    english = await env.ok("vault_search", query="deployed searching", mode="loose")
    assert ("daily/2026-11-20.md", 4) in {(r["path"], r["line"]) for r in english["results"]}


async def test_glob_relative_dir_and_limit(env: VaultEnv) -> None:
    everywhere = await env.ok("vault_search", query="の", mode="plain")
    assert len(everywhere["results"]) > 3
    only_daily = await env.ok("vault_search", query="の", mode="plain", relative_dir="daily")
    assert {r["path"] for r in only_daily["results"]} == {"daily/2026-11-20.md"}
    by_name = await env.ok("vault_search", query="の", mode="plain", glob="*要約.md")
    assert {r["path"] for r in by_name["results"]} == {"summaries/設計要約.md"}
    by_path = await env.ok("vault_search", query="の", mode="plain", glob="projects/**/*.md")
    assert {r["path"] for r in by_path["results"]} == {DESIGN, "projects/memhub/運用メモ.md"}
    limited = await env.ok("vault_search", query="の", mode="plain", limit=2)
    assert len(limited["results"]) == 2 and limited["truncated"] is True
    default = await env.ok("vault_search", query=".", mode="regex")
    assert len(default["results"]) == c.SEARCH_DEFAULT_LIMIT or not default["truncated"]
    for bad in (0, c.SEARCH_MAX_LIMIT + 1):
        assert await env.code("vault_search", query="x", limit=bad) == "invalid_parameter"
    assert await env.code("vault_search", query="x", mode="fuzzy") == "invalid_parameter"
    assert await env.code("vault_search", query="   ") == "invalid_parameter"
    assert await env.code("vault_search", query="x", relative_dir="missing") == "not_found"


async def test_front_matter_wiki_links_and_dot_folders(env: VaultEnv) -> None:
    tags = await env.ok("vault_search", query="tags: [design", mode="plain")
    assert tags["results"][0] == {"path": DESIGN, "snippet": "tags: [design, memhub]", "line": 3}
    theme = await env.ok("vault_search", query="obsidian", mode="plain")
    assert all(not r["path"].startswith(".obsidian") for r in theme["results"])


async def test_catastrophic_regex_returns_within_its_bound(env: VaultEnv) -> None:
    (env.root / "redos.md").write_text("a" * 40 + "b\n", encoding="utf-8")
    bound = c.REGEX_TIMEOUT_MS / 1000
    for pattern in ["(a|aa)+$", "(a+)+$", "^(a|a?)+$"]:
        started = time.monotonic()
        out = await env.ok("vault_search", query=pattern)
        elapsed = time.monotonic() - started
        assert elapsed < bound + 2.0, (pattern, elapsed)
        if out["truncated"]:
            assert out["warnings"] and "partial" in out["warnings"][0]
    stuck = await env.ok("vault_search", query="(a|aa)+$")
    assert stuck["truncated"] is True and stuck["results"] == []


async def test_server_answers_other_calls_while_a_regex_runs(env: VaultEnv) -> None:
    (env.root / "redos.md").write_text(("a" * 40 + "b\n") * 3, encoding="utf-8")
    answered: list[float] = []
    started = time.monotonic()

    async def slow() -> None:
        await env.ok("vault_search", query="(a|aa)+$")

    async def quick() -> None:
        await anyio.sleep(0.05)
        await env.ok("vault_read", path="README.md", full=True)
        answered.append(time.monotonic() - started)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(slow)
        tasks.start_soon(quick)
    assert answered and answered[0] < c.REGEX_TIMEOUT_MS / 1000
