"""Every tool call is audited in a hash chain; `memhub doctor` detects tampering."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mcp import Client

from memhub.audit.chain import verify_chain
from memhub.cli.container import Container
from tests.helpers import MEMHUB, error, ok
from tests.store.backends import Backend, RawError

pytestmark = pytest.mark.anyio


async def test_every_call_is_audited(client: Client, container: Container) -> None:
    pid = (await ok(client, "add-project", name="audited"))["project_id"]
    await ok(client, "get-projects")
    await error(client, "get-topics", {"project_id": 999})
    await error(client, "add-topic", {"project_id": pid})
    container.runtime.deferred.flush()  # reads and failures are audited by deferred writes
    events = list(container.runtime.store.iter_events())
    assert [(e.principal, e.tool, e.outcome) for e in events] == [
        ("alice", "add-project", "ok"),
        ("alice", "get-projects", "ok"),
        ("alice", "get-topics", "NOT_FOUND"),
        ("alice", "add-topic", "INVALID_PARAMETER"),
    ]
    assert verify_chain(events).ok


async def test_doctor_detects_an_edited_event(client: Client, container: Container, backend: Backend) -> None:
    for i in range(3):
        await ok(client, "add-project", name=f"p{i}")
    db = container.settings.db_url
    healthy = subprocess.run([MEMHUB, "--db", str(db), "doctor"], capture_output=True, text=True, timeout=30)
    assert healthy.returncode == 0 and "3 events, ok" in healthy.stdout

    # an attacker with file access: drop the guard, rewrite history
    with pytest.raises(RawError, match="append-only"):
        backend.execute(db, "UPDATE events SET principal = 'mallory' WHERE id = 2")
    backend.drop_audit_guard(db)
    backend.execute(db, "UPDATE events SET principal = 'mallory' WHERE id = 2")
    broken = subprocess.run([MEMHUB, "--db", str(db), "doctor"], capture_output=True, text=True, timeout=30)
    assert broken.returncode == 1
    assert "BROKEN" in broken.stdout and "event 2" in broken.stdout


def test_doctor_on_a_fresh_database(tmp_path: Path, backend: Backend) -> None:
    out = subprocess.run(
        [MEMHUB, "--db", backend.url(tmp_path, "new.db"), "doctor"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "integrity: ok" in out.stdout
