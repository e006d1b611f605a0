"""Two memhub processes share one vault: no acknowledged append is lost, no temp file stays."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from memhub.core.errors import ErrorKind, MemhubError
from memhub.services.vault.files import sweep_temp_files
from tests.helpers import REPO, ok, stdio_params
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio
APPENDS = int(os.environ.get("MEMHUB_VAULT_RACE_APPENDS", "1000"))


@pytest.mark.parametrize("lock", ["auto", "file"])  # file: what NFS and several machines use
def test_two_processes_append_to_one_note_and_lose_nothing(tmp_path: Path, lock: str) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    note = vault / "shared.md"
    note.write_text("# shared\n", encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src") + os.pathsep + str(REPO),
        "MEMHUB_LOG_LEVEL": "WARNING",
    }
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.services.vault.append_worker",
                str(tmp_path / f"home{n}"),
                str(vault),
                "shared.md",
                f"p{n}",
                str(APPENDS),
                lock,
            ],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in (0, 1)
    ]
    try:
        for worker in workers:  # both are up: start them together
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        reports = [
            json.loads(worker.communicate(timeout=300)[0].strip().splitlines()[-1]) for worker in workers
        ]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert all(worker.returncode == 0 for worker in workers)
    lines = note.read_text(encoding="utf-8").splitlines()
    for report in reports:
        assert report["refused"] == []  # memhub's own writers never conflict with each other
        assert len(report["acked"]) == APPENDS
        missing = set(report["acked"]) - set(lines)
        assert not missing, f"{len(missing)} acknowledged appends lost"
    assert len(lines) == 1 + 2 * APPENDS
    assert not [p.name for p in vault.iterdir() if ".memhub-tmp-" in p.name]
    assert (vault / ".memhub-lock").exists() == (lock == "file")  # auto: the folder is locked here


async def test_serve_sweeps_the_temporary_files_of_killed_writes(tmp_path: Path, backend: Backend) -> None:
    vault = tmp_path / "vault"
    (vault / "deep" / ".hidden").mkdir(parents=True)
    (vault / "note.md").write_text("kept\n", encoding="utf-8")
    stale = [vault / ".note.md.memhub-tmp-ab3_x9zq", vault / "deep" / ".hidden" / ".n.md.memhub-tmp-00000000"]
    others = [  # not named like memhub's temporary files: never touched
        vault / "draft.memhub-tmp-notes.md",
        vault / ".note.md.memhub-tmp-toolong123",
        vault / "deep" / "note.md.memhub-tmp-abcdefgh",
    ]
    for path in stale + others:
        path.write_bytes(b"half a note")
    db = backend.url(tmp_path, "m.db")
    params = stdio_params(db, "alice", "--toolsets", "vault", "--vault", str(vault))
    async with Client(params) as client:
        await ok(client, "vault_ls")
        deadline = time.monotonic() + 20
        while any(path.exists() for path in stale):
            assert time.monotonic() < deadline, [p.name for p in stale if p.exists()]
            await anyio.sleep(0.05)
        await ok(client, "vault_write", path="note.md", content="more", mode="append")
    assert all(path.exists() for path in others)
    assert (vault / "note.md").read_text(encoding="utf-8") == "kept\nmore"


def test_the_sweep_leaves_a_live_writers_temporary_file(tmp_path: Path) -> None:
    """While another process holds the vault lock its temporary file may be mid-write: kept."""
    vault = tmp_path / "vault"
    vault.mkdir()
    temp = vault / ".n.md.memhub-tmp-abcdefgh"
    temp.write_bytes(b"being written")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(vault)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(MemhubError) as refused:
            sweep_temp_files(vault, wait_s=0.2)
        assert refused.value.kind is ErrorKind.UNAVAILABLE
        assert temp.exists()
    finally:
        holder.communicate("done\n", timeout=10)
    assert sweep_temp_files(vault) == 1 and not temp.exists()


HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
"""
