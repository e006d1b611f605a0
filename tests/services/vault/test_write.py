"""vault_create, vault_write, vault_replace: folder rules, atomic writes, no lost external edit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memhub.services.vault import files
from tests.services.vault.conftest import DESIGN, VaultEnv

pytestmark = pytest.mark.anyio


def _temps(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".memhub-tmp-" in p.name]


async def test_create_then_write_and_append(env: VaultEnv) -> None:
    created = await env.ok("vault_create", path="inbox/idea.md", content="# アイデア\n")
    assert created == {"written_path": "inbox/idea.md", "written_bytes": len("# アイデア\n".encode())}
    assert await env.code("vault_create", path="inbox/idea.md", content="again") == "conflict"
    appended = await env.ok("vault_write", path="inbox/idea.md", content="- 一つ目", mode="append")
    assert appended["written_bytes"] == len("- 一つ目".encode())
    await env.ok("vault_write", path="inbox/idea.md", content="- two", mode="append")
    assert (env.root / "inbox/idea.md").read_text(encoding="utf-8") == "# アイデア\n- 一つ目\n- two"
    over = await env.ok("vault_write", path="inbox/idea.md", content="new\n", mode="overwrite")
    assert over["written_path"] == "inbox/idea.md"
    assert (env.root / "inbox/idea.md").read_text(encoding="utf-8") == "new\n"


async def test_write_needs_an_existing_file(env: VaultEnv) -> None:
    for mode in ("overwrite", "append"):
        assert await env.code("vault_write", path="nope.md", content="x", mode=mode) == "conflict"
    assert not (env.root / "nope.md").exists()
    assert await env.code("vault_write", path="projects", content="x", mode="append") == "invalid_path"
    assert await env.code("vault_write", path="README.md", content="x", mode="replace") == "invalid_parameter"
    assert await env.code("vault_write", path="README.md", content="x") == "invalid_parameter"
    assert await env.code("vault_create", path="projects", content="x") == "conflict"
    assert await env.code("vault_create", path="README.md/child.md", content="x") == "invalid_path"


async def test_system_folder_is_reserved(env: VaultEnv) -> None:
    (env.root / ".system").mkdir()
    (env.root / ".system" / "state.md").write_text("keep", encoding="utf-8")
    for raw in (".system/new.md", ".System/new.md", ".system/deep/new.md"):
        assert await env.code("vault_create", path=raw, content="x") == "forbidden"
    for mode in ("overwrite", "append"):
        assert await env.code("vault_write", path=".system/state.md", content="x", mode=mode) == "forbidden"
    assert await env.code("vault_replace", path=".system/state.md", find="keep", replace="x") == "forbidden"
    assert (env.root / ".system" / "state.md").read_text(encoding="utf-8") == "keep"
    assert sorted(p.name for p in (env.root / ".system").iterdir()) == ["state.md"]
    assert (await env.ok("vault_read", path=".system/state.md", full=True))["text"] == "keep"


@pytest.mark.parametrize(
    "raw",
    [
        "daily/2026-02-30.md",  # no such date
        "daily/2026-13-01.md",
        "daily/26-11-21.md",
        "daily/2026-11-21.txt",
        "daily/2026-11-21-extra.md",
        "daily/notes.md",
        "daily/2026/2026-11-21.md",
    ],
)
async def test_daily_takes_only_real_dates(env: VaultEnv, raw: str) -> None:
    assert await env.code("vault_create", path=raw, content="x") == "forbidden"


async def test_daily_notes_are_created_then_only_appended(env: VaultEnv) -> None:
    assert await env.code("vault_write", path="daily/2026-11-22.md", content="x", mode="append") == "conflict"
    await env.ok("vault_create", path="daily/2024-02-29.md", content="# 2024-02-29\n")  # a leap day
    await env.ok("vault_create", path="daily/2026-11-22.md", content="# 2026-11-22\n")
    await env.ok("vault_write", path="daily/2026-11-22.md", content="- 朝会\n", mode="append")
    code = await env.code("vault_write", path="daily/2026-11-22.md", content="gone", mode="overwrite")
    assert code == "forbidden"
    code = await env.code("vault_replace", path="daily/2026-11-22.md", find="朝会", replace="x")
    assert code == "forbidden"
    assert (env.root / "daily/2026-11-22.md").read_text(encoding="utf-8") == "# 2026-11-22\n- 朝会\n"
    assert await env.code("vault_create", path="daily/2026-11-22.md", content="x") == "conflict"


async def test_replace_counts_and_defaults_to_one(env: VaultEnv) -> None:
    (env.root / "r.md").write_text("a-a-a-a\n", encoding="utf-8")
    assert await env.ok("vault_replace", path="r.md", find="a", replace="b") == {
        "written_path": "r.md",
        "replacements": 1,
    }
    assert (await env.ok("vault_replace", path="r.md", find="a", replace="c", max_replacements=2))[
        "replacements"
    ] == 2
    many = await env.ok("vault_replace", path="r.md", find="a", replace="d", max_replacements=50)
    assert many["replacements"] == 1
    assert (env.root / "r.md").read_text(encoding="utf-8") == "b-c-c-d\n"
    assert await env.code("vault_replace", path="r.md", find="zzz", replace="x") == "conflict"
    assert await env.code("vault_replace", path="r.md", find="b", replace="x", max_replacements=0) == (
        "invalid_parameter"
    )
    assert await env.code("vault_replace", path="r.md", find="", replace="x") == "invalid_parameter"
    assert await env.code("vault_replace", path="missing.md", find="b", replace="x") == "not_found"


async def test_writes_replace_the_file_atomically(env: VaultEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure before the rename (here: fsync of the temporary file) leaves the old note whole."""
    note = env.root / DESIGN
    original = note.read_bytes()
    inode = note.stat().st_ino

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(files, "_fsync", broken_fsync)
    code = await env.code("vault_write", path=DESIGN, content="half" * 10_000, mode="overwrite")
    assert code == "unavailable"
    code = await env.code("vault_replace", path=DESIGN, find="SQLite", replace="PostgreSQL")
    assert code == "unavailable"
    assert await env.code("vault_create", path="projects/memhub/new.md", content="x") == "unavailable"
    assert note.read_bytes() == original
    assert not (env.root / "projects/memhub/new.md").exists()
    assert _temps(note.parent) == []
    monkeypatch.undo()
    await env.ok("vault_write", path=DESIGN, content="whole\n", mode="overwrite")
    assert note.read_text(encoding="utf-8") == "whole\n"
    assert note.stat().st_ino != inode  # a new file renamed into place, not rewritten in place
    assert _temps(note.parent) == []


async def test_an_edit_during_the_write_is_not_lost(env: VaultEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone saves the note while memhub writes its temporary file: conflict, their edit stays."""
    note = env.root / "projects/memhub/Release checklist.md"
    real_fsync = files._fsync

    def edit_meanwhile(fd: int) -> None:
        with note.open("a", encoding="utf-8") as handle:
            handle.write("- edited in Obsidian\n")
        real_fsync(fd)

    monkeypatch.setattr(files, "_fsync", edit_meanwhile)
    path = "projects/memhub/Release checklist.md"
    for arguments in (
        {"mode": "overwrite", "content": "memhub's version\n"},
        {"mode": "append", "content": "- memhub's line\n"},
    ):
        assert await env.code("vault_write", path=path, **arguments) == "conflict"
    assert await env.code("vault_replace", path=path, find="Tag", replace="Sign") == "conflict"
    text = note.read_text(encoding="utf-8")
    assert "- edited in Obsidian" in text and "memhub" not in text.replace("memhub/", "")
    assert "Tag the release" in text
    assert _temps(note.parent) == []


async def test_overwrite_after_an_external_edit_needs_a_fresh_read(env: VaultEnv) -> None:
    note = env.root / "README.md"
    await env.ok("vault_read", path="README.md", full=True)
    note.write_text(note.read_text(encoding="utf-8") + "\nadded by hand\n", encoding="utf-8")
    code = await env.code("vault_write", path="README.md", content="replaced\n", mode="overwrite")
    assert code == "conflict"
    assert "added by hand" in note.read_text(encoding="utf-8")
    await env.ok("vault_read", path="README.md", range={"start_line": 1})
    await env.ok("vault_write", path="README.md", content="replaced\n", mode="overwrite")
    assert note.read_text(encoding="utf-8") == "replaced\n"
    # appending never drops anything, so it needs no fresh read
    note.write_text("by hand\n", encoding="utf-8")
    await env.ok("vault_write", path="README.md", content="memhub\n", mode="append")
    assert note.read_text(encoding="utf-8") == "by hand\nmemhub\n"


async def test_file_mode_is_kept(env: VaultEnv) -> None:
    note = env.root / "README.md"
    os.chmod(note, 0o600)
    await env.ok("vault_replace", path="README.md", find="Sample", replace="Example")
    assert note.stat().st_mode & 0o777 == 0o600


async def test_content_limits_and_bad_text(env: VaultEnv) -> None:
    big = "x" * 1_000_001
    assert await env.code("vault_create", path="big.md", content=big) == "invalid_parameter"
    assert await env.code("vault_create", path="nul.md", content="a\x00b") == "invalid_parameter"
    assert await env.code("vault_create", path="n.md", content=5) == "invalid_parameter"
    assert await env.code("vault_create", path="n.md") == "invalid_parameter"
    assert await env.code("vault_create", path="n.md", content="x", extra=1) == "invalid_parameter"
    assert await env.code("vault_create", path="x/.a.md.memhub-tmp-abc", content="x") == "invalid_path"
