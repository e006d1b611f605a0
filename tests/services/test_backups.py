"""Daily backups with an injected clock (no sleeps): taken once a day after the set time, verified,
pruned to the newest `keep`, listed by `memhub backup list`, and restorable."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from mcp import Client

from memhub.cli.container import build_container
from memhub.services import ops
from memhub.services.backups import DailyBackups, list_backups
from tests.conftest import make_settings
from tests.helpers import MEMHUB, FixedClock, http_server, ok, stdio_params
from tests.store.backends import Backend, postgres_only, sqlite_only

pytestmark = pytest.mark.anyio


@sqlite_only("backups")
async def test_daily_backup_is_taken_verified_pruned_and_restorable(tmp_path: Path, backend: Backend) -> None:
    container = build_container(make_settings(tmp_path, backend, toolsets=("discussion",)))
    clock = FixedClock(datetime(2026, 3, 1, 2, 59, tzinfo=UTC))
    container.runtime.clock = clock
    daily = DailyBackups(container.runtime, "03:00", keep=2)
    try:
        async with Client(container.server) as client:
            await ok(client, "add-project", name="before-the-backup")
            assert await daily.take_if_due() is None  # 02:59: not yet
            assert daily.seconds_until_next() == 60
            clock.at += timedelta(minutes=2)
            first = await daily.take_if_due()
            assert first is not None and first.name == "memhub-daily-20260301.db"
            assert await daily.take_if_due() is None  # once a day
            for day in (2, 3):
                clock.at = datetime(2026, 3, day, 4, 0, tzinfo=UTC)
                assert await daily.take_if_due() is not None
            names = [b.path.name for b in list_backups(container.runtime)]
            assert names == ["memhub-daily-20260302.db", "memhub-daily-20260303.db"]  # keep=2
            await ok(client, "add-project", name="after-the-backup")
            newest = list_backups(container.runtime)[-1].path
            assert (await ops.restore(container.runtime, newest, apply=True)).restored
            projects = (await ok(client, "get-projects"))["projects"]
            assert [p["name"] for p in projects] == ["before-the-backup"]
    finally:
        container.close()
    listed = subprocess.run(
        [MEMHUB, "--home", str(tmp_path), "--db", backend.url(tmp_path), "backup", "list"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()
    assert [line.split("\t")[2] for line in listed] == ["daily", "daily"]
    assert listed[0].split("\t")[0].endswith("memhub-daily-20260302.db")


@sqlite_only("backups")
async def test_a_backup_that_fails_verification_is_not_kept(
    tmp_path: Path, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    container = build_container(make_settings(tmp_path, backend, toolsets=("discussion",)))
    container.runtime.clock = FixedClock(datetime(2026, 3, 1, 5, 0, tzinfo=UTC))
    store = container.runtime.store
    monkeypatch.setattr(store, "verify_backup", lambda path: ["integrity: broken page"])
    try:
        assert await DailyBackups(container.runtime, "03:00", keep=3).take_if_due() is None
        assert list_backups(container.runtime) == []
    finally:
        container.close()


@sqlite_only("backups")
async def test_two_servers_take_todays_backup_of_one_store_at_once(tmp_path: Path, backend: Backend) -> None:
    """Replicas on one SQLite file both find today's backup owed at start: each writes its own
    partial file (one shared file made SQLite's copy fail and stopped a server), both finish,
    and one verified backup is left, with no partial files beside it."""
    containers = [
        build_container(make_settings(tmp_path, backend, toolsets=("discussion",))) for _ in range(2)
    ]
    try:
        async with Client(containers[0].server) as client:
            for i in range(50):
                await ok(client, "add-project", name=f"p{i}")
        dailies = []
        for container in containers:
            container.runtime.clock = FixedClock(datetime(2026, 3, 1, 5, 0, tzinfo=UTC))
            dailies.append(DailyBackups(container.runtime, "03:00", keep=3))
        backup = tmp_path / "backups" / "memhub-daily-20260301.db"
        store = containers[0].runtime.store
        for _ in range(5):
            taken: list[Path | None] = []

            async def take(daily: DailyBackups, into: list[Path | None]) -> None:
                into.append(await daily.take_if_due())

            async with anyio.create_task_group() as tg:
                for daily in dailies:
                    tg.start_soon(take, daily, taken)
            assert any(taken)
            assert sorted(p.name for p in backup.parent.iterdir()) == [backup.name]
            assert not store.verify_backup(backup)
            backup.unlink()
    finally:
        for container in containers:
            container.close()


@sqlite_only("backups")
async def test_partial_files_of_killed_backups_are_removed_after_a_day(
    tmp_path: Path, backend: Backend
) -> None:
    container = build_container(make_settings(tmp_path, backend, toolsets=("discussion",)))
    now = datetime(2026, 3, 1, 5, 0, tzinfo=UTC)
    container.runtime.clock = FixedClock(now)
    folder = tmp_path / "backups"
    folder.mkdir()
    killed, writing = folder / "memhub-daily-20260227.db.41.ab.partial", folder / "x.db.42.cd.partial"
    for path in (killed, writing):
        path.write_bytes(b"half a copy")
    two_days_ago = (now - timedelta(days=2)).timestamp()
    os.utime(killed, (two_days_ago, two_days_ago))
    os.utime(writing, (now.timestamp(), now.timestamp()))
    try:
        assert await DailyBackups(container.runtime, "03:00", keep=3).take_if_due() is not None
    finally:
        container.close()
    assert not killed.exists() and writing.exists()


@sqlite_only("backups")
async def test_serve_takes_no_daily_backup_when_the_time_is_empty(tmp_path: Path) -> None:
    """`MEMHUB_BACKUP_TIME=` (set, empty) turns the daily backup off; `00:00` (always past) is the
    control: that server writes today's backup at start."""
    for name, at in (("on", "00:00"), ("off", "")):
        home = tmp_path / name
        params = stdio_params(home / "memhub.db", "alice")
        params.args = ["--home", str(home), *params.args]
        assert params.env is not None
        params.env["MEMHUB_BACKUP_TIME"] = at
        async with Client(params) as client:
            await ok(client, "add-project", name="p")
            deadline = time.monotonic() + 20
            while at and not list((home / "backups").glob("memhub-daily-*.db")):
                assert time.monotonic() < deadline, "the control server took no backup"
                await anyio.sleep(0.05)
        daily = sorted(p.name for p in (home / "backups").glob("memhub-daily-*.db"))
        assert len(daily) == (1 if at else 0), (name, daily)


@postgres_only
def test_serve_on_postgresql_takes_no_daily_backup_and_says_why(tmp_path: Path, backend: Backend) -> None:
    """A daily backup is a SQLite file: on PostgreSQL serve says once at start that pg_dump is
    the way, and writes no backup (nor fails one every day)."""
    log = tmp_path / "stderr.log"
    env = {"MEMHUB_HOME": str(tmp_path), "MEMHUB_BACKUP_TIME": "00:00", "MEMHUB_LOG_LEVEL": "INFO"}
    with log.open("wb") as stderr, http_server(backend.url(tmp_path), env=env, stderr=stderr):
        deadline = time.monotonic() + 20
        while "no daily backups" not in log.read_text(encoding="utf-8", errors="replace"):
            assert time.monotonic() < deadline, log.read_text(encoding="utf-8", errors="replace")[-2000:]
            time.sleep(0.05)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "pg_dump" in text and "daily backup failed" not in text
    assert not (tmp_path / "backups").exists()
