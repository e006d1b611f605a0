"""Switching a SQLite file to WAL when other connections may be opening it at the same moment.

`PRAGMA journal_mode = WAL` on a file still in rollback mode needs the file to itself, and
while another connection is writing it (switching it too, say) SQLite answers "database is
locked" at once, without waiting out the busy timeout as it does for reads and writes: two
processes opening a new store together (or the rate-limit file beside it, at their first
limited calls) then failed 19 times in 1,000 simultaneous opens here. The switch is retried
for about `timeout_s` (callers pass their connection's busy timeout; one attempt may itself
wait that long in SQLite's busy handler, where the other connection only reads); once the file
is in WAL (stored in it), the pragma only reads the mode.
"""

from __future__ import annotations

import sqlite3
import time

FIRST_PAUSE_S = 0.001
LONGEST_PAUSE_S = 0.05


def use_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Put `conn`'s file in WAL mode, trying again for about `timeout_s` while another
    connection holds it (SQLITE_BUSY); the last refusal is raised after that, any other
    error at once."""
    deadline = time.monotonic() + timeout_s
    pause = FIRST_PAUSE_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or left <= 0:
                raise
        time.sleep(min(pause, left))  # a backoff between two attempts, not a wait for an event
        pause = min(2 * pause, LONGEST_PAUSE_S)
