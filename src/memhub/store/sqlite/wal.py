"""Switching a SQLite file to WAL when other connections may be opening it at the same moment.

`PRAGMA journal_mode = WAL` on a file still in rollback mode needs the file to itself, and
while another connection is switching (or reading) it SQLite answers "database is locked" at
once, without waiting out the busy timeout as it does for reads and writes: two processes
opening a new store together (or the rate-limit file beside it, at their first limited calls)
then failed 19 times in 1,000 simultaneous opens here. The switch is retried until the
connection's own busy timeout has passed; once the file is in WAL (stored in it), the
pragma only reads the mode.
"""

from __future__ import annotations

import sqlite3
import time

FIRST_PAUSE_S = 0.001
LONGEST_PAUSE_S = 0.05


def use_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Put `conn`'s file in WAL mode, waiting up to `timeout_s` for another connection that
    holds it; the last "database is locked" is raised after that."""
    deadline = time.monotonic() + timeout_s
    pause = FIRST_PAUSE_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)  # a backoff between two attempts, not a wait for an event
        pause = min(2 * pause, LONGEST_PAUSE_S)
