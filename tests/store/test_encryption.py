"""Content encrypted at rest: the words are absent from the database file's bytes while keyword,
substring (discussion) and CJK search still find them; a wrong or missing key is refused at
start-up; `memhub encryption rotate` moves a store to a new key or encrypts a plaintext one."""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from memhub.cli.container import build_container
from memhub.core.errors import MemhubError
from memhub.store.rows import NewItem
from tests.conftest import make_settings
from tests.helpers import MEMHUB, ok
from tests.store.backends import Backend, sqlite_only

pytestmark = [
    pytest.mark.anyio,
    sqlite_only("encryption"),
]
SECRET_WORDS = ("quetzalcoatl", "marmalade", "zirconium")
CONTENT = "The quetzalcoatl marmalade recipe needs zirconium spoons; 秘密の暗号鍵は金庫にある"


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def _file_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.glob("memhub.db*") if p.is_file())


async def _write_and_search(home: Path, key: str, backend: Backend) -> None:
    container = build_container(make_settings(home, backend, embedder="none", encryption_key=key))
    try:
        async with Client(container.server) as client:
            stored = await ok(client, "memory", action="store", content=CONTENT, domain="user")
            memory_id = stored["memory"]["id"]
            found = await ok(client, "memory", action="search", query="zirconium spoons")
            assert [m["id"] for m in found["memories"]][:1] == [memory_id]
            cjk = await ok(client, "memory", action="search", query="暗号鍵")
            assert memory_id in [m["id"] for m in cjk["memories"]]
            assert (await ok(client, "memory", action="get", memory_id=memory_id))["memory"][
                "content"
            ] == CONTENT
            pid = (await ok(client, "add-project", name="vault"))["project_id"]
            await ok(client, "add-topic", project_id=pid, title="marmalade plans", description="quetzalcoatl")
            topics = await ok(client, "search-topics", project_id=pid, keyword="marmalade")
            assert [t["title"] for t in topics["topics"]] == ["marmalade plans"]
    finally:
        container.close()


async def test_encrypted_content_is_absent_from_the_file_and_still_found(
    tmp_path: Path, backend: Backend
) -> None:
    key = _key()
    await _write_and_search(tmp_path, key, backend)
    raw = _file_bytes(tmp_path)
    for word in (*SECRET_WORDS, "秘密"):
        assert word.encode() not in raw, word
    assert b"mhenc1:" in raw
    with pytest.raises(MemhubError, match="encrypted"):
        build_container(make_settings(tmp_path, backend, embedder="none"))
    with pytest.raises(MemhubError, match="key"):
        build_container(make_settings(tmp_path, backend, embedder="none", encryption_key=_key()))


def _memhub(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MEMHUB, "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MEMHUB_EMBEDDER": "none", **env},
    )


async def test_rotation_to_a_new_key_and_from_plaintext(tmp_path: Path, backend: Backend) -> None:
    old, new = _key(), _key()
    await _write_and_search(tmp_path, old, backend)
    key_file = tmp_path / "new.key"
    key_file.write_text(_memhub(tmp_path, {}, "encryption", "keygen").stdout.strip() or new)
    done = _memhub(
        tmp_path, {"MEMHUB_ENCRYPTION_KEY": old}, "encryption", "rotate", "--new-key-file", str(key_file)
    )
    assert done.returncode == 0, done.stderr
    with pytest.raises(MemhubError):
        build_container(make_settings(tmp_path, backend, embedder="none", encryption_key=old))
    container = build_container(
        make_settings(tmp_path, backend, embedder="none", encryption_key_file=str(key_file))
    )
    try:
        async with Client(container.server) as client:
            found = await ok(client, "memory", action="search", query="quetzalcoatl")
            assert found["memories"] and found["memories"][0]["content"] == CONTENT
    finally:
        container.close()

    plain = tmp_path / "plain"
    container = build_container(make_settings(plain, backend, embedder="none"))
    try:
        async with Client(container.server) as client:
            await ok(client, "memory", action="store", content=CONTENT, domain="user")
    finally:
        container.close()
    assert SECRET_WORDS[0].encode() in _file_bytes(plain)
    done = _memhub(plain, {}, "encryption", "rotate", "--new-key-file", str(key_file))
    assert done.returncode == 0, done.stderr
    raw = _file_bytes(plain)
    assert not any(word.encode() in raw for word in SECRET_WORDS)  # old plaintext pages are gone too


async def test_active_contexts_are_encrypted_too(tmp_path: Path, backend: Backend) -> None:
    """pce.memory.activate stores the claims it hands out: that copy is sealed like the items."""
    container = build_container(make_settings(tmp_path, backend, embedder="none", encryption_key=_key()))
    try:
        async with Client(container.server) as client:
            provenance = {"at": "2025-01-31T12:00:00Z", "note": "from the marmalade runbook"}
            for text in ("The quetzalcoatl deploy uses zirconium canaries", "a second claim"):
                await ok(client, "pce.memory.upsert", text=text, kind="fact", scope="project",
                         boundary_class="internal", provenance=provenance)  # fmt: skip
            active = await ok(client, "pce.memory.activate", q="quetzalcoatl zirconium", scope=["project"])
            assert "quetzalcoatl" in str(active["data"])  # its provenance is kept in the context
    finally:
        container.close()
    with sqlite3.connect(tmp_path / "memhub.db") as conn:  # provenance (in attrs) is documented as plain
        stored = [row[0] for row in conn.execute("SELECT body FROM pce_active_contexts")]
    assert stored and not [body for body in stored if "marmalade" in body or "clm_" in body]


def test_a_backup_under_another_key_is_not_restorable(tmp_path: Path, backend: Backend) -> None:
    first = build_container(make_settings(tmp_path / "a", backend, embedder="none", encryption_key=_key()))
    plain = build_container(make_settings(tmp_path / "c", backend, embedder="none"))
    try:
        with first.runtime.store.transaction(write=True) as tx:
            tx.insert_item(NewItem(kind="memory", owner="alice", scope="user", body="quetzalcoatl"))
        backup = tmp_path / "a.db"
        first.runtime.store.backup_to(backup)  # type: ignore[attr-defined]
        other = build_container(
            make_settings(tmp_path / "b", backend, embedder="none", encryption_key=_key())
        )
        try:
            problems = other.runtime.store.verify_backup(backup)  # type: ignore[attr-defined]
            assert problems and "key" in problems[0]
        finally:
            other.close()
        assert "key" in plain.runtime.store.verify_backup(backup)[0]  # type: ignore[attr-defined]
        assert first.runtime.store.verify_backup(backup) == []  # type: ignore[attr-defined]
    finally:
        first.close()
        plain.close()


def _rotations(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT detail FROM events WHERE tool = 'cli.encryption.rotate'")]


def _encrypted(db: Path) -> bool:
    with sqlite3.connect(db) as conn:
        return bool(conn.execute("SELECT body LIKE 'mhenc1:%' FROM items LIMIT 1").fetchone()[0])


def test_rotation_and_its_audit_event_commit_together(
    tmp_path: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`encryption rotate` writes its audit event in the rotation's own transaction: a crash
    right after the commit keeps both, a failure before it leaves neither."""
    from memhub.cli.main import main
    from memhub.store.sqlite import encryption
    from memhub.store.sqlite.tx import SqliteTx

    container = build_container(make_settings(tmp_path, backend, embedder="none"))
    try:
        with container.runtime.store.transaction(write=True) as tx:
            tx.insert_item(NewItem(kind="memory", owner="alice", scope="user", body=CONTENT))
    finally:
        container.close()
    db, key_file = tmp_path / "memhub.db", tmp_path / "new.key"
    key = _key()
    key_file.write_text(key)
    monkeypatch.setenv("MEMHUB_EMBEDDER", "none")
    rotate = ["--home", str(tmp_path), "encryption", "rotate", "--new-key-file", str(key_file)]

    def fail_before_commit(self: SqliteTx, batch: int = 2_000) -> int:
        raise RuntimeError("killed before the commit")

    with monkeypatch.context() as patch:
        patch.setattr(SqliteTx, "reindex_text", fail_before_commit)
        with pytest.raises(RuntimeError, match="before the commit"):
            main(rotate)
    assert not _encrypted(db) and _rotations(db) == []

    real_check_key = encryption.check_key

    def crash_after_commit(conn: sqlite3.Connection, cipher: object) -> None:
        if cipher is not None:  # rotate's first step after its commit
            raise RuntimeError("killed after the commit")
        real_check_key(conn, None)

    with monkeypatch.context() as patch:
        patch.setattr(encryption, "check_key", crash_after_commit)
        with pytest.raises(RuntimeError, match="after the commit"):
            main(rotate)
    assert _encrypted(db)
    assert len(_rotations(db)) == 1 and '"encrypted": true' in _rotations(db)[0]
    monkeypatch.setenv("MEMHUB_ENCRYPTION_KEY", key)
    capsys.readouterr()
    assert main(["--home", str(tmp_path), "doctor"]) == 0, capsys.readouterr().out
    assert "audit chain" in capsys.readouterr().out
