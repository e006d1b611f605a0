"""`memhub decision|proposal|reflect`: decisions entered by a person, as subprocesses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import MEMHUB, REPO
from tests.store.backends import selected


def memhub(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {"MEMHUB_EMBEDDER": "none", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", **env}
    environ["PYTHONPATH"] = str(REPO / "src")  # this checkout's source, whichever one the venv installed
    return subprocess.run(
        [
            MEMHUB,
            "--home",
            str(home),
            "--db",
            selected().url(home),
            "--user",
            "alice",
            "--project",
            "demo",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )


def _ok(home: Path, *args: str, **env: str) -> str:
    done = memhub(home, *args, **env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.usefixtures("backend")  # memhub() runs on the backend under test
def test_decisions_by_a_person(tmp_path: Path) -> None:
    add = ["decision", "add", "--title", "Use MySQL", "--target", "database_policy"]
    first = json.loads(_ok(tmp_path, *add, "--rationale", "the team knows it", "--consequence", "no DBA"))
    assert first["decision"]["via"] == "cli" and "[via MCP]" not in first["message"]
    assert first["decision"]["consequences"] == ["no DBA"]
    short = memhub(tmp_path, *add, "--rationale", "short")
    assert short.returncode == 1 and "Validation Error: rationale" in short.stderr

    sup = [
        "decision", "supersede", "dec_1", "--title", "Use PostgreSQL", "--target", "database_policy",
        "--rationale", "JSON columns and better concurrency",
    ]  # fmt: skip
    second = json.loads(_ok(tmp_path, *sup))["decision"]
    assert second["supersedes"] == ["dec_1"]
    again = memhub(tmp_path, *sup)
    assert again.returncode == 1 and "Conflict: dec_1 is already superseded by dec_2" in again.stderr

    shown = json.loads(_ok(tmp_path, "decision", "show", "2"))
    assert (
        shown["chain"] == ["dec_1", "dec_2"]
        and shown["author"] == "alice"
        and shown["shown_as"] == "Use PostgreSQL"
    )
    assert _ok(tmp_path, "decision", "deprecate", "dec_2", "--reason", "we dropped the database").strip() == (
        "dec_2 deprecated"
    )
    listed = _ok(tmp_path, "decision", "list").splitlines()
    assert listed == [
        "dec_2\tdeprecated\tdatabase_policy\tUse PostgreSQL",
        "dec_1\tsuperseded\tdatabase_policy\tUse MySQL",
    ]
    assert _ok(tmp_path, "decision", "list", "--status", "superseded").splitlines() == [listed[1]]
    missing = memhub(tmp_path, "decision", "show", "dec_99")
    assert missing.returncode == 1 and "dec_99 does not exist" in missing.stderr


@pytest.mark.usefixtures("backend")
def test_reflect_and_review_proposals(tmp_path: Path) -> None:
    for title, target, why in (
        ("Use MySQL", "database_policy", "the team knows it"),
        ("Use PostgreSQL", "Database-Policy", "JSON columns matter"),
        ("Use ruff", "lint", "one fast linter"),
    ):
        _ok(tmp_path, "decision", "add", "--title", title, "--target", target, "--rationale", why)
    written = _ok(tmp_path, "reflect").split()
    assert len(written) == 1 and Path(written[0]).parent == tmp_path / "proposals"
    assert _ok(tmp_path, "reflect") == ""  # an open proposal for the same decisions: not twice
    name = Path(written[0]).name
    listed = _ok(tmp_path, "proposal", "list").strip().split("\t")
    assert listed[:3] == [name, "open", "Database-Policy"] and listed[3].startswith("review ")
    assert 'supersedes: ["dec_1", "dec_2"]' in _ok(tmp_path, "proposal", "show", name)

    early = memhub(tmp_path, "proposal", "accept", name)
    assert early.returncode == 1 and "PI1 Violation" in early.stderr and "left" in early.stderr
    accepted = _ok(tmp_path, "proposal", "accept", name, MEMHUB_REVIEW_WINDOW_S="0")
    assert accepted.strip() == f"proposal {name} accepted as dec_4, superseding dec_1, dec_2"
    assert "dec_4\tactive" in _ok(tmp_path, "decision", "list")

    _ok(tmp_path, "decision", "add", "--title", "Use mypy", "--target", "lint", "--rationale", "types help")
    other = Path(_ok(tmp_path, "reflect").strip()).name
    assert _ok(tmp_path, "proposal", "reject", other, "--reason", "both hold").strip() == f"{other} rejected"
    late = memhub(tmp_path, "proposal", "accept", other, MEMHUB_REVIEW_WINDOW_S="0")
    assert late.returncode == 1 and "Conflict: proposal" in late.stderr and "already rejected" in late.stderr
    assert memhub(tmp_path, "proposal", "accept", "../x.md").returncode == 1
