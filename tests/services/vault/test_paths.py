"""No path leads out of the vault: text tricks, encodings, look-alikes and symlinks."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest

from tests.services.vault.conftest import VaultEnv

pytestmark = pytest.mark.anyio

SECRET = "TOP-SECRET-CONTENT"

ATTACKS = [
    ("../secret.md", "out_of_scope"),
    ("notes/../../secret.md", "out_of_scope"),
    ("projects/../../secret.md", "out_of_scope"),
    ("..", "out_of_scope"),
    ("/etc/passwd", "out_of_scope"),
    ("/", "out_of_scope"),
    ("~/secret.md", "out_of_scope"),
    ("C:/Windows/win.ini", "out_of_scope"),
    ("c:secret.md", "out_of_scope"),
    ("file:///etc/passwd", "out_of_scope"),
    ("..\\secret.md", "invalid_path"),
    ("\\\\server\\share\\secret.md", "invalid_path"),
    ("notes\\..\\..\\secret.md", "invalid_path"),
    ("secret.md\x00.png", "invalid_path"),
    ("line\nbreak.md", "invalid_path"),
    ("%2e%2e/secret.md", "invalid_path"),
    ("..%2fsecret.md", "invalid_path"),
    ("%252e%252e%252fsecret.md", "invalid_path"),
    ("%c0%ae%c0%ae/secret.md", "invalid_path"),
    ("\uff0e\uff0e/secret.md", "invalid_path"),  # fullwidth dots, NFKC ".."
    ("..\uff0fsecret.md", "invalid_path"),  # fullwidth solidus, NFKC "/"
    ("\u2024\u2024/secret.md", "invalid_path"),  # one dot leaders
    ("notes//secret.md", "invalid_path"),
    ("./secret.md", "invalid_path"),
    ("notes/./secret.md", "invalid_path"),
    ("a" * 300 + ".md", "invalid_path"),
    ("a/" * 700 + "x.md", "invalid_path"),
    ("", "invalid_path"),
    ("notes/", "invalid_path"),  # a file path cannot name a folder
    ("link-out/secret.md", "out_of_scope"),  # a folder symlink pointing outside
    ("escape.md", "out_of_scope"),  # a file symlink pointing outside
]


@pytest.fixture
def outside(env: VaultEnv) -> Path:
    """A secret next to the vault, and two symlinks from inside the vault to it."""
    out = env.root.parent / "outside"
    out.mkdir()
    (out / "secret.md").write_text(SECRET, encoding="utf-8")
    (env.root.parent / "secret.md").write_text(SECRET, encoding="utf-8")
    os.symlink(out, env.root / "link-out")
    os.symlink(out / "secret.md", env.root / "escape.md")
    return out


def _tree(path: Path) -> dict[str, bytes]:
    """Every file under `path` but the database (its audit log records the refused calls)."""
    return {
        str(p): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.name.startswith("memhub.db")
    }


def test_attack_list_is_long_enough() -> None:
    assert len({raw for raw, _ in ATTACKS}) >= 20


@pytest.mark.parametrize(("raw", "code"), ATTACKS)
async def test_every_tool_refuses_the_path(env: VaultEnv, outside: Path, raw: str, code: str) -> None:
    before = _tree(env.root.parent)
    calls = [
        ("vault_read", {"path": raw, "full": True}),
        ("vault_scan", {"path": raw}),
        ("vault_coverage", {"path": raw, "cited_ranges": []}),
        ("vault_create", {"path": raw, "content": "pwned"}),
        ("vault_write", {"path": raw, "content": "pwned", "mode": "overwrite"}),
        ("vault_write", {"path": raw, "content": "pwned", "mode": "append"}),
        ("vault_replace", {"path": raw, "find": "SECRET", "replace": "pwned"}),
        ("artifact_audit", {"artifact_path": raw, "source_path": "README.md"}),
        ("artifact_audit", {"artifact_path": "README.md", "source_path": raw}),
    ]
    if raw and not raw.endswith("/"):  # an empty folder is the root; a folder may end in /
        calls += [
            ("vault_ls", {"relative_dir": raw}),
            ("vault_search", {"query": "SECRET", "relative_dir": raw}),
            ("vault_find", {"query": "SECRET", "scope": {"relative_dir": raw}}),
        ]
    for tool, arguments in calls:
        result = await env.client.call_tool(tool, arguments)
        assert result.is_error, (tool, raw)
        body = json.loads(result.content[0].text)
        assert result.structured_content is None and body["error"]["code"] == code, (tool, raw, body)
        assert SECRET not in str(body)
    assert _tree(env.root.parent) == before


async def test_search_and_find_never_follow_links_out(env: VaultEnv, outside: Path) -> None:
    found = await env.ok("vault_search", query="SECRET", mode="plain")
    assert found["results"] == []
    summary = (await env.ok("vault_find", query="TOP-SECRET-CONTENT"))["summary"]
    assert summary["candidates"] == 0
    listed = [e["path"] for e in (await env.ok("vault_ls"))["entries"]]
    assert "link-out" not in listed and "escape.md" not in listed


async def test_symlinks_inside_the_vault_work(env: VaultEnv) -> None:
    os.symlink(env.root / "README.md", env.root / "alias.md")
    read = await env.ok("vault_read", path="alias.md", full=True)
    assert read["text"].startswith("# Sample vault")


async def test_a_symlink_cannot_smuggle_a_write_into_system(env: VaultEnv) -> None:
    (env.root / ".system").mkdir()
    (env.root / ".system" / "config.md").write_text("reserved", encoding="utf-8")
    os.symlink(env.root / ".system", env.root / "innocent")
    assert await env.code("vault_create", path="innocent/new.md", content="x") == "forbidden"
    write = {"path": "innocent/config.md", "content": "x", "mode": "overwrite"}
    assert await env.code("vault_write", **write) == "forbidden"
    assert (env.root / ".system" / "config.md").read_text(encoding="utf-8") == "reserved"
    assert not (env.root / ".system" / "new.md").exists()


async def test_japanese_names_and_spaces_are_fine(env: VaultEnv) -> None:
    assert (await env.ok("vault_read", path="日記/りんごの保存.md", range={"start_line": 1}))["text"]
    assert (await env.ok("vault_read", path="projects/memhub/Release checklist.md", full=True))["text"]
    created = await env.ok("vault_create", path="新しい フォルダ/メモ (1).md", content="こんにちは\n")
    assert created["written_path"] == "新しい フォルダ/メモ (1).md"


async def test_decomposed_and_composed_names_meet(env: VaultEnv) -> None:
    """A note named on macOS (NFD: カ + ゛) is found from the composed name, and the reverse."""
    nfd = unicodedata.normalize("NFD", "ガイド")
    assert nfd != "ガイド"
    (env.root / nfd).mkdir()
    (env.root / nfd / "メモ.md").write_text("# ガイド\n", encoding="utf-8")
    read = await env.ok("vault_read", path="ガイド/メモ.md", full=True)
    assert read["text"] == "# ガイド"
    await env.ok("vault_write", path="ガイド/メモ.md", content="- 追記\n", mode="append")
    assert (env.root / nfd / "メモ.md").read_text(encoding="utf-8") == "# ガイド\n- 追記\n"
    (env.root / "ダウンロード.md").write_text("x\n", encoding="utf-8")
    assert (await env.ok("vault_read", path=unicodedata.normalize("NFD", "ダウンロード.md"), full=True))[
        "text"
    ] == "x"
