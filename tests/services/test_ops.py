"""Operations through the tools: backups and restores a tool names stay in the backups folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import counts
from tests.pair import Pair

pytestmark = pytest.mark.anyio


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
