"""Operations through the tools: backups and restores a tool names stay in the backups folder,
and their errors name no server path. Backups are SQLite's (on PostgreSQL the admin tool points
to pg_dump: tests/services/assoc/test_manage.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import counts
from tests.pair import Pair
from tests.store.backends import sqlite_only

pytestmark = [pytest.mark.anyio, sqlite_only("backups")]


@pytest.mark.parametrize(
    "path",
    ["../../../../tmp/x.db", "~/x.db", "/tmp/memhub-escape.db", "/proc/self/x.db", "a\\b.db", "x\x00.db",
     "sub/../../x.db", "/etc/shadow"],
)  # fmt: skip
async def test_tool_backup_paths_stay_in_the_backups_folder(pair: Pair, tmp_path: Path, path: str) -> None:
    before = counts(pair.container.settings.db_url)
    for action, extra in (("backup", {"force": True}), ("restore", {"force": True})):
        err = await pair.a_err("admin", action=action, backup_path=path, **extra)
        assert err["error"]["code"] == "invalid_parameter", (action, path, err)
        assert "backups folder" in err["error"]["message"] or "NUL" in err["error"]["message"]
    assert not Path("/tmp/memhub-escape.db").exists() and not (tmp_path.parent / "x.db").exists()
    assert counts(pair.container.settings.db_url) == before
    made = await pair.a("admin", action="backup", backup_path="nested/ok.db")
    assert Path(made["details"]["path"]) == tmp_path / "backups" / "nested" / "ok.db"


async def test_admin_errors_name_no_server_path(pair: Pair, tmp_path: Path) -> None:
    """Every way an admin backup or restore can fail names the file as the caller gave it, never
    where the backups folder (or the home, or the store) is on the server."""
    folder = tmp_path / "backups"
    (folder / "a-folder.db").mkdir(parents=True)
    (folder / "garbage.db").write_bytes(b"not a database at all" * 100)
    (folder / "plain-file").write_bytes(b"x")
    (folder / "outside").symlink_to(tmp_path.parent)
    await pair.a("admin", action="backup", backup_path="taken.db")
    calls: list[dict[str, object]] = [
        {"action": "backup", "backup_path": "../x.db"},
        {"action": "backup", "backup_path": "/etc/x.db"},
        {"action": "backup", "backup_path": "outside/x.db"},
        {"action": "backup", "backup_path": "taken.db"},
        {"action": "backup", "backup_path": "a-folder.db", "force": True},
        {"action": "backup", "backup_path": "plain-file/x.db"},
        {"action": "restore", "backup_path": "../x.db"},
        {"action": "restore", "backup_path": "outside/x.db"},
        {"action": "restore", "backup_path": "missing.db"},
        {"action": "restore", "backup_path": "garbage.db", "force": True},
        {"action": "restore", "backup_path": "a-folder.db"},
        {"action": "restore"},
    ]
    leaks = [str(tmp_path), str(tmp_path.resolve()), str(pair.container.settings.db_path)]
    for arguments in calls:
        message = (await pair.a_err("admin", **arguments))["error"]["message"]
        assert not [leak for leak in leaks if leak in message], (arguments, message)
    garbage = (await pair.a_err("admin", action="restore", backup_path="garbage.db"))["error"]["message"]
    assert garbage.startswith("garbage.db cannot be restored")
    assert (
        "missing.db not found"
        in (await pair.a_err("admin", action="restore", backup_path="missing.db"))["error"]["message"]
    )
