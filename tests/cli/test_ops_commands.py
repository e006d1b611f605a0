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
from tests.store.backends import Backend, rows

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


async def test_backup_export_import_restore_reindex(tmp_path: Path, backend: Backend) -> None:
    container = build_container(make_settings(tmp_path, backend, toolsets=("assoc",)))
    async with Client(container.server) as client:
        for text in ("設計方針を決めた", "we chose SQLite WAL"):
            await ok(client, "memory", action="store", content=text, domain="user")
    container.close()
    db = container.settings.db_url

    backup = tmp_path / "copy.db"
    done = memhub(db, "backup", str(backup))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"] == str(backup) and memories(backup) == memories(db)
    assert memhub(db, "backup", str(backup)).returncode == 1  # exists: needs --force
    slim = tmp_path / "slim.db"
    assert memhub(db, "backup", str(slim), "--exclude", "memories").returncode == 0
    assert memories(slim) == [] and len(memories(db)) == 2

    exported = tmp_path / "memories.json"
    assert memhub(db, "export", "-o", str(exported)).returncode == 0
    other = backend.url(tmp_path, "other.db")
    imported = memhub(other, "import", str(exported))
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 memories" in imported.stderr and memories(other) == memories(db)

    assert memhub(other, "restore", str(slim)).returncode == 0
    assert memories(other) == []
    assert memhub(other, "restore", str(tmp_path / "missing.db")).returncode == 1

    reindexed = memhub(db, "reindex")
    assert reindexed.returncode == 0, reindexed.stderr
    assert json.loads(reindexed.stdout)["text_indexed"] == 2
    doctor = memhub(db, "doctor")
    assert doctor.returncode == 0 and "ok" in doctor.stdout
