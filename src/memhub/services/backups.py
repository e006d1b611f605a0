"""Daily backups (seed 003 §5.3): `memhub serve` takes one online backup a day at a set UTC time
into `$MEMHUB_HOME/backups/`, verifies it, and keeps the newest `keep` of them.

Time comes from `runtime.clock`, so tests move a clock instead of sleeping: `due` says whether
today's backup is owed, `take_if_due` takes it. A backup that fails verification is deleted
and logged, and the next check tries again.
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import anyio

from memhub.core.errors import MemhubError
from memhub.core.settings import parse_hhmm
from memhub.services import ops
from memhub.services.runtime import Runtime

log = logging.getLogger(__name__)
DAILY = re.compile(r"^memhub-daily-(\d{8})\.db$")
CHECK_EVERY_S = 60.0  # the scheduler looks at the clock this often at most
PARTIAL_MAX_AGE_S = 86_400.0  # a backup's partial file older than this was left by a killed process


@dataclass(frozen=True)
class BackupFile:
    path: Path
    bytes: int
    daily: bool


backups_dir = ops.backups_dir


def list_backups(runtime: Runtime) -> list[BackupFile]:
    """Every backup in the backups directory (daily and manual), oldest first."""
    folder = backups_dir(runtime)
    if not folder.is_dir():
        return []
    files = sorted(p for p in folder.iterdir() if p.suffix == ".db" and p.is_file())
    return [BackupFile(p, p.stat().st_size, bool(DAILY.match(p.name))) for p in files]


class DailyBackups:
    def __init__(self, runtime: Runtime, at: str, keep: int) -> None:
        self.runtime = runtime
        self.hour, self.minute = parse_hhmm(at)
        self.keep = max(1, keep)
        self.taken: list[Path] = []

    def _slot(self, now: datetime) -> datetime:
        """Today's backup time (UTC)."""
        return now.replace(hour=self.hour, minute=self.minute, second=0, microsecond=0)

    def path_for(self, now: datetime) -> Path:
        return backups_dir(self.runtime) / f"memhub-daily-{now.strftime('%Y%m%d')}.db"

    def due(self) -> Path | None:
        """Today's backup file when it is owed (the time has passed and it is not there)."""
        now = self.runtime.clock.now()
        if now < self._slot(now):
            return None
        path = self.path_for(now)
        return None if path.exists() else path

    def seconds_until_next(self) -> float:
        now = self.runtime.clock.now()
        slot = self._slot(now)
        if now >= slot:
            slot += timedelta(days=1)
        return max(0.0, (slot - now).total_seconds())

    async def take_if_due(self) -> Path | None:
        """Take, verify and prune; the path written, or None when nothing was owed or it failed."""
        path = self.due()
        if path is None:
            return None
        try:
            await ops.backup(self.runtime, path)
            await ops.restore(
                self.runtime, path, apply=False
            )  # verify: a backup we could not restore is none
        except MemhubError as exc:
            path.unlink(missing_ok=True)
            log.error("daily backup failed: %s", exc.message)
            return None
        self.taken.append(path)
        self.prune()
        log.info("daily backup written to %s", path)
        return path

    def prune(self) -> list[Path]:
        """Delete daily backups beyond the newest `keep` (manual backups are never touched),
        and partial files older than a day (a backup whose process was killed mid-copy)."""
        daily = [b.path for b in list_backups(self.runtime) if b.daily]
        old = daily[: max(0, len(daily) - self.keep)]
        folder = backups_dir(self.runtime)
        cutoff = self.runtime.clock.now().timestamp() - PARTIAL_MAX_AGE_S
        with contextlib.suppress(OSError):
            old += [p for p in folder.glob("*.partial") if p.is_file() and p.stat().st_mtime < cutoff]
        for path in old:
            path.unlink(missing_ok=True)
        return old

    async def run_forever(self) -> None:
        while True:
            await self.take_if_due()
            await anyio.sleep(min(CHECK_EVERY_S, self.seconds_until_next() + 1.0))
