"""The embedded SQLite store: one file, WAL, busy timeout, `BEGIN IMMEDIATE` writes.

Connections, as datasette's `Database` keeps them: one writer connection per process, used by
one write transaction at a time (a lock orders them, `BEGIN IMMEDIATE` takes the file's
writer lock), and one read connection per thread (`query_only`), opened on the thread's
first read. In WAL mode a reader never waits for a writer, and each read transaction sees
everything committed before it began, by this process or another: a read right after a
write of the same process sees it. Every connection gets the `mh_plain` function
(encryption.register). Readers of threads that have ended are closed when the next reader
is opened. `read_pair` adds second readers (pooled, a few kept while idle) and a probe
connection that tells whether anything was committed between two moments; `close()` closes
the writer, every reader, the second readers and the probe.

Several processes may share the file: SQLite's own locking orders their writes,
`busy_timeout` makes a writer wait instead of failing, and the in-process indexes follow
other processes' writes through `vector_log`.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from memhub.core.clock import Clock, SystemClock, isoformat
from memhub.core.errors import ErrorKind, MemhubError
from memhub.store.base import EventRow, Tx, VectorChange
from memhub.store.crypto import PREFIX, ContentCipher
from memhub.store.sqlite import doctor, encryption, sealing
from memhub.store.sqlite.buckets import BucketFile, BucketsMixin
from memhub.store.sqlite.errors import storage_error as _storage_error
from memhub.store.sqlite.tx import SqliteTx
from memhub.store.sqlite.wal import use_wal

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
_PRAGMAS = (
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    "PRAGMA temp_store = MEMORY",
)
WRITER_CACHE_KIB = 32_000
# Per thread that reads: a bound, filled only as pages are read (and emptied whenever another
# connection has committed since the reader's last transaction). Each thread that reads keeps
# its own, so the process holds up to this many KiB per such thread (five in a 100k server):
# 4 MB, not 16: a 100k search fetches ~12k pages and misses ~1,160 of them instead of ~1,010
# (~1 % of its CPU), for ~12 MiB less per reader (docs/benchmarks.md, "100k server memory:
# SQLite's caches and the e5 file's pages").
READER_CACHE_KIB = 4_000
IDLE_PARTNERS = 4  # read_pair's second readers kept open while idle (each with its page cache)
# a read of the file that starts a reader's snapshot in WAL mode (BEGIN alone does not)
_FIRST_READ = "SELECT 1 FROM sqlite_master LIMIT 1"
_EXCLUDABLE = {  # base.BACKUP_PARTS, removed from a backup copy
    "memories": "DELETE FROM items WHERE kind = 'memory'",
    "associations": "DELETE FROM links WHERE type = 'association'",
    "sessions": "DELETE FROM sessions",
    "projects": "DELETE FROM projects",
}


def _migrations() -> list[tuple[int, str, str]]:
    folder = resources.files("memhub.store.sqlite") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


_CREATE_TABLE = re.compile(r"CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)


def memhub_tables() -> set[str]:
    """The tables memhub's migrations create (what a memhub store must hold)."""
    return {"schema_migrations"} | {
        name for _v, _n, script in _migrations() for name in _CREATE_TABLE.findall(script)
    }


def _opening_error(path: Path, exc: sqlite3.Error | UnicodeDecodeError) -> MemhubError:
    reason = "its schema holds bytes that are not text" if isinstance(exc, UnicodeDecodeError) else exc
    reason = " ".join(str(reason).split())  # one line: SQLite may quote the damaged schema
    reason = reason if len(reason) <= 160 else reason[:159] + "…"
    return MemhubError(
        ErrorKind.STORAGE,
        f"cannot open the database {path.name}: {reason} (`memhub doctor` names what is wrong with it)",
    )


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (triggers contain `;`, so use sqlite's own test)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer
            buffer = ""
    if buffer.strip():
        yield buffer


class SqliteStore(BucketsMixin):
    backend = "sqlite"

    def __init__(
        self, path: str | Path, *, clock: Clock | None = None, keys: Sequence[bytes] = (), check: bool = False
    ) -> None:
        """`keys`: content encryption (store/crypto.py); the first encrypts, all decrypt.
        `check` (`memhub serve`): refuse a file SQLite reports as damaged before writing to it
        (`PRAGMA integrity_check`, ~0.2 s per 250 MB). A file SQLite cannot open, or without
        memhub's tables, is refused in any case: a one-line MemhubError, never a traceback."""
        self.path = Path(path)
        self._bucket_file = BucketFile(self.path)  # shared rate limits (opened when first used)
        self._keys = list(keys)
        self.cipher = ContentCipher(self._keys) if self._keys else None
        self.location = str(self.path)
        self.clock: Clock = clock or SystemClock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # the writer connection: one write transaction at a time
        self._checked: tuple[float, bool] | None = None  # (monotonic time, result) of the last quick_check
        self._local = threading.local()  # .conn: this thread's reader
        self._readers: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._readers_lock = threading.Lock()
        self._partners: list[sqlite3.Connection] = []  # idle second readers of `read_pair`
        self._probe: sqlite3.Connection | None = None  # `read_pair`'s "did anyone commit?" probe
        self._probe_lock = threading.Lock()
        self._closed = False
        if check and (damage := doctor.wal_refusal(self.path)) is not None:
            raise MemhubError(ErrorKind.STORAGE, f"the database {self.path.name} is damaged: {damage}")
        try:
            self._open(check)
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # the latter: damaged schema text
            if getattr(self, "_conn", None) is not None:
                self._conn.close()
            raise _opening_error(self.path, exc) from None

    def _open(self, check: bool) -> None:
        self._conn = self._connect(read=False)
        # stored in the file: every connection uses it (retried: another process may be opening it)
        use_wal(self._conn, BUSY_TIMEOUT_MS / 1000)
        if check and (damage := doctor.refusal(self._conn, self.path)) is not None:
            self._conn.close()
            raise MemhubError(
                ErrorKind.STORAGE,
                f"the database {self.path.name} is damaged, so memhub will not write to it: {damage}"
                " (run `memhub doctor`; restore a backup with `memhub restore PATH`)",
            )
        self._migrate()
        present = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = sorted(memhub_tables() - present)
        if missing:
            self._conn.close()
            raise MemhubError(
                ErrorKind.STORAGE,
                f"the database {self.path.name} lacks memhub tables ({', '.join(missing)}):"
                " damaged, or not a memhub store (run `memhub doctor`)",
            )
        encryption.check_key(self._conn, self.cipher)
        # the checks above scan the file (check_key's probes read every item when none match,
        # `check` the whole file): give back the pages they left in the writer's cache, which
        # would otherwise hold WRITER_CACHE_KIB of them for the life of the process
        self._conn.execute("PRAGMA shrink_memory")

    def _connect(self, *, read: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
        )
        conn.row_factory = sqlite3.Row
        for pragma in _PRAGMAS:
            conn.execute(pragma)
        conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB if read else WRITER_CACHE_KIB}")
        if read:
            conn.execute("PRAGMA query_only = ON")
        encryption.register(conn, lambda: self.cipher)
        return conn

    def _reader(self) -> sqlite3.Connection:
        """This thread's read connection (opened on its first read)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._readers_lock:
            if self._closed:
                raise MemhubError(ErrorKind.STORAGE, "the store is closed")
            for thread, other in [entry for entry in self._readers if not entry[0].is_alive()]:
                other.close()  # its thread has ended: nothing uses it any more
                self._readers.remove((thread, other))
            try:
                conn = self._connect(read=True)
            except sqlite3.Error as exc:
                raise _storage_error(exc) from exc
            self._readers.append((threading.current_thread(), conn))
        self._local.conn = conn
        return conn

    # -- schema -------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations"
                    " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
                )
                applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
                for version, name, script in _migrations():
                    if version in applied:
                        continue
                    log.info("applying migration %s", name)
                    for statement in _statements(script):
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                        (version, name, isoformat(self.clock.now())),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def schema_version(self) -> int:
        row = self._reader().execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[SqliteTx]:
        """One transaction: committed when the block ends, rolled back if it raises. A write
        runs on the writer connection (one at a time); a read on this thread's reader, without
        waiting for any write. A read inside a read of the same thread joins it (one snapshot:
        the vector index rescoring inside a search's transaction, for one)."""
        if not write:
            reader = self._reader()
            if _in_transaction(reader):
                yield SqliteTx(reader, isoformat(self.clock.now()), write=False, cipher=self.cipher)
                return
            with _transaction(reader, "BEGIN") as conn:
                yield SqliteTx(conn, isoformat(self.clock.now()), write=False, cipher=self.cipher)
            return
        with self._lock, _transaction(self._conn, "BEGIN IMMEDIATE") as conn:
            yield SqliteTx(conn, isoformat(self.clock.now()), write=True, cipher=self.cipher)

    @contextmanager
    def read_pair(self) -> Iterator[tuple[SqliteTx, SqliteTx | None]]:
        """`transaction(write=False)` and a second read transaction on a connection of its own
        that sees the same snapshot (`Store.read_pair`). In WAL mode a reader's snapshot is
        taken at its first read: both first reads run between two reads of `PRAGMA data_version`
        on a probe connection outside any transaction, which changes when any other connection
        (this process's writer too) has committed; where it changed, the second is given up
        (None) and nobody waited. Within a read of this thread: that one, and None."""
        reader = self._reader()
        if _in_transaction(reader):
            with self.transaction(write=False) as tx:
                yield tx, None
            return
        now = isoformat(self.clock.now())
        with _transaction(reader, "BEGIN") as conn:
            partner = self._partner()
            try:  # a failure here fails the first transaction (`_transaction`: a storage error)
                before = self._committed()
                conn.execute(_FIRST_READ).fetchall()
                partner.execute("BEGIN")
                partner.execute(_FIRST_READ).fetchall()
                paired = self._committed() == before
                second = SqliteTx(partner, now, write=False, cipher=self.cipher) if paired else None
                yield SqliteTx(conn, now, write=False, cipher=self.cipher), second
            finally:
                _rollback(partner)
                self._release_partner(partner)

    def _partner(self) -> sqlite3.Connection:
        """An idle second reader for `read_pair` (opened when none is idle)."""
        with self._readers_lock:
            if self._closed:
                raise MemhubError(ErrorKind.STORAGE, "the store is closed")
            if self._partners:
                return self._partners.pop()
        try:
            conn = self._connect(read=True)
        except sqlite3.Error as exc:
            raise _storage_error(exc) from exc
        if self._closed:  # closed meanwhile: nobody would close this one
            conn.close()
            raise MemhubError(ErrorKind.STORAGE, "the store is closed")
        return conn

    def _release_partner(self, conn: sqlite3.Connection) -> None:
        """Back to the idle ones; past IDLE_PARTNERS (after a burst of searches), or once the
        store is closed (`close` leaves a second reader in use open), closed."""
        with self._readers_lock:
            if not self._closed and len(self._partners) < IDLE_PARTNERS:
                self._partners.append(conn)
                return
        conn.close()

    def _committed(self) -> int:
        """The probe's `PRAGMA data_version`: changes once another connection has committed."""
        with self._probe_lock:
            if self._probe is None:
                if self._closed:
                    raise MemhubError(ErrorKind.STORAGE, "the store is closed")
                self._probe = self._connect(read=True)
            return int(self._probe.execute("PRAGMA data_version").fetchone()[0])

    # -- change feeds and maintenance ---------------------------------------------------

    def data_version(self) -> int:
        """Changes when another process commits: a cheap "anything new?" probe (asked of the
        writer connection, so this process's own writes do not count)."""
        with self._lock:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def vector_changes(
        self, embedder: str, after_seq: int, limit: int | None = None
    ) -> tuple[int, list[VectorChange]]:
        """Vector puts and deletes after `after_seq`, the latest per item, and the new high-water
        mark. With `limit`, a page: the next `limit` log entries only (see `Store.vector_changes`)."""
        rows = (
            self._reader()
            .execute(
                "SELECT l.seq, l.item_id, l.op, v.vec FROM ("
                "  SELECT item_id, max(seq) AS seq FROM ("
                "    SELECT seq, item_id FROM vector_log WHERE embedder = ? AND seq > ?"
                "    ORDER BY seq LIMIT ?"
                "  ) GROUP BY item_id"
                ") last JOIN vector_log l ON l.seq = last.seq"
                " LEFT JOIN vectors v ON v.item_id = l.item_id AND v.embedder = l.embedder"
                " ORDER BY l.seq",
                (embedder, after_seq, -1 if limit is None else limit),
            )
            .fetchall()
        )
        changes = [
            VectorChange(row["seq"], row["item_id"], row["vec"] if row["op"] == "put" else None)
            for row in rows
        ]
        high = changes[-1].seq if changes else after_seq
        return high, changes

    def vector_deletions(self, embedder: str, after_seq: int) -> tuple[int, list[int]]:
        """Items whose vector from `embedder` was deleted after `after_seq`, and the new high-water mark."""
        rows = (
            self._reader()
            .execute(
                "SELECT seq, item_id, op FROM vector_log WHERE embedder = ? AND seq > ? ORDER BY seq",
                (embedder, after_seq),
            )
            .fetchall()
        )
        high = rows[-1][0] if rows else after_seq
        return high, sorted({r[1] for r in rows if r[2] == "del"})

    def iter_events(self) -> Iterator[EventRow]:
        rows = self._reader().execute("SELECT * FROM events ORDER BY id").fetchall()
        for row in rows:
            yield EventRow(
                row["id"],
                row["at"],
                row["principal"],
                row["tool"],
                row["outcome"],
                json.loads(row["detail"]),
                row["prev_hash"],
                row["hash"],
            )

    def integrity_check(self) -> list[str]:
        """Problems SQLite finds in the file (empty list: healthy), FTS index included."""
        with self._lock:
            problems = [r[0] for r in self._conn.execute("PRAGMA integrity_check") if r[0] != "ok"]
            problems += [f"foreign key: {tuple(r)}" for r in self._conn.execute("PRAGMA foreign_key_check")]
            try:
                self._conn.execute("INSERT INTO items_fts(items_fts) VALUES ('integrity-check')")
            except sqlite3.DatabaseError as exc:
                problems.append(f"text index: {exc}")
        return problems

    def file_size(self) -> int:
        """Bytes on disk: the database and its write-ahead log."""
        wal = self.path.with_name(self.path.name + "-wal")
        return self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

    def quick_check(self, max_age_s: float = 0.0) -> bool:
        """PRAGMA quick_check (reads the whole file: ~1 s per 500 MB, on this thread's reader).
        A result younger than `max_age_s` is answered again instead, so a health endpoint polled
        every second does not stall the store."""
        now = time.monotonic()
        if self._checked is not None and now - self._checked[0] < max_age_s:
            return self._checked[1]
        ok = bool(self._reader().execute("PRAGMA quick_check").fetchone()[0] == "ok")
        self._checked = (time.monotonic(), ok)
        return ok

    def rotate_encryption(self, new_key: bytes | None, audit: Callable[[Tx], object] | None = None) -> int:
        """Re-encrypt all item text under `new_key` (None: decrypt it all) and rebuild the text
        index; old text is then gone from the file (secure_delete, VACUUM). Items rewritten."""
        readable = [*([new_key] if new_key else []), *self._keys]
        ring = ContentCipher(readable or [bytes(32)])  # no key at all: only plaintext is readable
        new = ContentCipher([new_key]) if new_key else None
        with self._lock:
            done = encryption.rotate(self._conn, ring, new, isoformat(self.clock.now()), audit)
            self._keys = [new_key] if new_key else []
            self.cipher = new
        return done

    def backup_to(self, target: Path, exclude: Sequence[str] = ()) -> None:
        """A consistent copy of the live database (SQLite's online backup), safe while others
        write; the `BACKUP_PARTS` named in `exclude` are then deleted from the copy."""
        unknown = set(exclude) - set(_EXCLUDABLE)
        if unknown:
            raise ValueError(f"cannot leave out {sorted(unknown)}")
        try:
            destination = sqlite3.connect(target)
        except sqlite3.Error as exc:
            raise _storage_error(exc) from exc
        try:
            self._reader().backup(destination)  # one step: one read snapshot, writers go on
            # the copy is one self-contained file: in WAL mode (the live store's) every read-only
            # open of it (verify, restore) would leave a -wal and a -shm file beside it
            destination.execute("PRAGMA journal_mode = DELETE")
            if exclude:
                destination.execute("PRAGMA foreign_keys = ON")
                with destination:
                    for part in exclude:
                        destination.execute(_EXCLUDABLE[part])
        except sqlite3.Error as exc:  # the copy's file (disk full, a folder that went away…)
            raise _storage_error(exc) from exc
        finally:
            destination.close()

    def restore_from(self, source: Path) -> None:
        """Replace the live database's content with a verified backup (see `verify_backup`)."""
        self._checked = None  # the file changes wholesale: check it afresh
        origin = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        try:
            with self._lock:
                origin.backup(self._conn)
                if self.cipher is not None:  # a backup of an older memhub: seal what it left in clear
                    sealing.seal_leftovers(self._conn, self.cipher)
        finally:
            origin.close()

    def verify_backup(self, source: Path) -> list[str]:
        """Problems that make `source` unfit to restore (empty list: fit)."""
        try:
            conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            return [f"cannot open: {exc}"]
        try:
            check = [r[0] for r in conn.execute("PRAGMA integrity_check")]
            if check != ["ok"]:
                return [f"integrity: {c}" for c in check[:10]]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"items", "projects", "schema_migrations", "events"} <= tables:
                return ["not a memhub database (tables missing)"]
            version = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0
            if version > self.schema_version():
                return [f"made by a newer memhub (schema {version} > {self.schema_version()})"]
            return self._readable_with_this_key(conn)
        except sqlite3.DatabaseError as exc:
            return [f"not a database: {exc}"]
        finally:
            conn.close()

    def _readable_with_this_key(self, conn: sqlite3.Connection) -> list[str]:
        """A backup's text must be readable after the restore: encrypted under a key this store
        holds, or plaintext for a store without one."""
        sealed = conn.execute(
            "SELECT body FROM items WHERE substr(body, 1, ?) = ? LIMIT 1", (len(PREFIX), PREFIX)
        ).fetchone()
        if sealed is None:
            plain = conn.execute("SELECT 1 FROM items WHERE body != '' LIMIT 1").fetchone()
            if plain is not None and self.cipher is not None:
                return ["the backup is not encrypted, this store is: restore it into a store without a key"]
            return []
        if self.cipher is None:
            return ["the backup is encrypted: start memhub with its key to restore it"]
        try:
            self.cipher.decrypt(str(sealed[0]), "body")
        except (MemhubError, ValueError):
            return ["the backup is encrypted with a key this store does not hold"]
        return []

    def close(self) -> None:
        """Close the writer and every reader (after the write under way, if any); a second
        reader of `read_pair` in use is closed when its pair ends."""
        with self._lock, self._readers_lock:
            self._closed = True
            for _, conn in self._readers:
                conn.close()
            self._readers.clear()
            for conn in self._partners:  # idle ones: one in use is closed when it is released
                conn.close()
            self._partners.clear()
            with self._probe_lock:
                if self._probe is not None:
                    self._probe.close()
                    self._probe = None
            self._conn.close()
        self._close_buckets()


@contextmanager
def _transaction(conn: sqlite3.Connection, begin: str) -> Iterator[sqlite3.Connection]:
    try:
        conn.execute(begin)
    except sqlite3.Error as exc:
        raise _storage_error(exc) from exc
    try:
        yield conn
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        _rollback(conn)
        raise _storage_error(exc) from exc
    except BaseException:
        _rollback(conn)
        raise


def _in_transaction(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.ProgrammingError:  # closed (the store was closed): BEGIN reports it
        return False


def _rollback(conn: sqlite3.Connection) -> None:
    if _in_transaction(conn):
        conn.execute("ROLLBACK")
