"""store/sqlite/wal.py: a file switched to WAL while another connection holds it (two processes
opening a new store, or its rate-limit file, at the same moment). SQLite answers the switch
"database is locked" at once, without waiting out the busy timeout; `use_wal` waits."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from memhub.store.sqlite.wal import use_wal


def test_the_switch_to_wal_waits_for_a_connection_that_holds_the_file(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")  # still in rollback mode, writing: the switch must wait
    holder.execute("INSERT INTO t VALUES (1)")
    switching = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
    statements: list[str] = []
    retried = threading.Event()

    def traced(statement: str) -> None:  # each attempt of the pragma
        statements.append(statement)
        if len(statements) >= 2:
            retried.set()

    switching.set_trace_callback(traced)
    outcome: list[str] = []

    def switch() -> None:
        try:
            use_wal(switching, 5.0)
            outcome.append("wal")
        except sqlite3.OperationalError as exc:
            outcome.append(str(exc))
        finally:
            retried.set()

    thread = threading.Thread(target=switch)
    thread.start()
    assert retried.wait(10.0)  # refused once at least, and trying again (or given up)
    holder.execute("COMMIT")
    thread.join()
    assert outcome == ["wal"]
    assert switching.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    holder.close()
    switching.close()


def test_a_switch_that_stays_refused_fails_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO t VALUES (1)")
    switching = sqlite3.connect(path, isolation_level=None, timeout=0.05)
    try:
        use_wal(switching, 0.05)
    except sqlite3.OperationalError as exc:
        assert "locked" in str(exc)
    else:
        raise AssertionError("the switch went through while the file was held")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        switching.close()
