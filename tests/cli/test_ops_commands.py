"""`memhub backup|restore|reindex|export|import`: the operations a person runs, as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from memhub.cli.container import build_container
from tests.conftest import make_settings
from tests.helpers import MEMHUB, ok
from tests.store.backends import Backend, postgres_only, rows, sqlite_only

pytestmark = pytest.mark.anyio


def memhub(db: str | Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"MEMHUB_EMBEDDER": "none", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    if "PYTHONPATH" in os.environ:  # a worktree's source, as the stores the test made in-process
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(
        [MEMHUB, "--db", str(db), "--user", "alice", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def memories(db: str | Path) -> list[str]:
    return [r[0] for r in rows(db, "SELECT body FROM items WHERE kind = 'memory' ORDER BY id")]


async def _two_memories(tmp_path: Path, backend: Backend) -> str:
    """A store holding two memories (the server closed); its location."""
    container = build_container(make_settings(tmp_path, backend, toolsets=("assoc",)))
    async with Client(container.server) as client:
        for text in ("設計方針を決めた", "we chose SQLite WAL"):
            await ok(client, "memory", action="store", content=text, domain="user")
    container.close()
    return container.settings.db_url


@sqlite_only("backups")
async def test_backup_and_restore(tmp_path: Path, backend: Backend) -> None:
    db = await _two_memories(tmp_path, backend)
    backup = tmp_path / "copy.db"
    done = memhub(db, "backup", str(backup))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"] == str(backup) and memories(backup) == memories(db)
    assert memhub(db, "backup", str(backup)).returncode == 1  # exists: needs --force
    slim = tmp_path / "slim.db"
    assert memhub(db, "backup", str(slim), "--exclude", "memories").returncode == 0
    assert memories(slim) == [] and len(memories(db)) == 2

    other = backend.url(tmp_path, "other.db")
    assert memhub(other, "import", str(_export(db, tmp_path))).returncode == 0
    assert memhub(other, "restore", str(slim)).returncode == 0
    assert memories(other) == []
    assert memhub(other, "restore", str(tmp_path / "missing.db")).returncode == 1


def _export(db: str, tmp_path: Path) -> Path:
    exported = tmp_path / "memories.json"
    assert memhub(db, "export", "-o", str(exported)).returncode == 0
    return exported


async def test_export_import_reindex_doctor(tmp_path: Path, backend: Backend) -> None:
    db = await _two_memories(tmp_path, backend)
    other = backend.url(tmp_path, "other.db")
    imported = memhub(other, "import", str(_export(db, tmp_path)))
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 memories" in imported.stderr and memories(other) == memories(db)

    reindexed = memhub(db, "reindex")
    assert reindexed.returncode == 0, reindexed.stderr
    assert json.loads(reindexed.stdout)["text_indexed"] == 2
    doctor = memhub(db, "doctor")
    assert doctor.returncode == 0 and "ok" in doctor.stdout


@postgres_only
async def test_backup_and_restore_of_postgresql_point_to_pg_dump(tmp_path: Path, backend: Backend) -> None:
    """memhub's backups copy SQLite files: on PostgreSQL `backup` and `restore` (and its
    `--check`) refuse in one line that names pg_dump/pg_restore, and write nothing."""
    db = await _two_memories(tmp_path, backend)
    backup = tmp_path / "copy.db"
    for args in (["backup", str(backup)], ["restore", str(backup)], ["restore", "--check", str(backup)]):
        refused = memhub(db, *args)
        assert refused.returncode != 0, args
        message = refused.stderr.strip()
        assert "pg_dump" in message and "pg_restore" in message and "\n" not in message, message
        assert "Traceback" not in refused.stderr
    assert not backup.exists() and len(memories(db)) == 2
