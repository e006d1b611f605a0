"""What is wrong with a SQLite store file, found read-only and named in words (`memhub doctor`).

`diagnose` looks at the file in layers, each only when the one below holds: the 100-byte
header (magic, page size, format bytes, page count against the file size), the write-ahead
log (header, salts and checksums of every frame, the last commit), what SQLite's
`integrity_check` reports, the tables memhub's migrations create, then memhub's own
invariants (every item has exactly its text-index row, no vector, link or tag points at a
missing item, vectors have their dimension's size, stored text is valid UTF-8). It never
writes, never raises on a damaged file, and never checkpoints the WAL.

`refusal` is the cheap part `memhub serve` runs before opening a store: a damaged header or
WAL header, then `integrity_check`; the server refuses to write into a damaged file.
"""

from __future__ import annotations

import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"SQLite format 3\x00"
WAL_MAGICS = (0x377F0682, 0x377F0683)
WAL_HEADER, FRAME_HEADER = 32, 24
SHOWN = 3  # problems quoted per finding


@dataclass(frozen=True, slots=True)
class Finding:
    area: str  # header, wal, sqlite, integrity, tables, text index, vectors, links, tags, text
    text: str
    damage: bool = True  # False: a note (a crash's torn WAL tail), not a failure


@dataclass
class Diagnosis:
    findings: list[Finding] = field(default_factory=list)
    openable: bool = True  # SQLite reads it whole: memhub may open it to check the audit chain

    @property
    def damaged(self) -> bool:
        return any(f.damage for f in self.findings)


def diagnose(path: Path, tables: set[str]) -> Diagnosis:
    """Everything found wrong with the store file at `path` (and its `-wal`); `tables`: the
    tables memhub's migrations create."""
    found = Diagnosis()
    if not path.exists():
        return found  # a new store
    size = path.stat().st_size
    wal = _wal_path(path)
    logged = wal.exists() and wal.stat().st_size > WAL_HEADER  # page 1 may live in the log
    if size == 0 and not logged:
        found.findings.append(Finding("file", "empty: memhub creates a new store in it", damage=False))
        return found
    page_size = _header(path, size, found, whole=not logged) if size else None
    _wal(path, page_size, found)
    if found.damaged:
        found.openable = False
        if any(f.area == "header" for f in found.findings):
            return found
    _contents(path, tables, found)
    return found


def refusal(conn: sqlite3.Connection, path: Path) -> str | None:
    """Why a server must not write into this store (None: it may): SQLite reports damage."""
    lines = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(20)")]
    if lines == ["ok"]:
        return None
    return f"SQLite's integrity check reports {_count(lines)}: {_quote(lines)}"


def wal_refusal(path: Path) -> str | None:
    """A WAL whose header is damaged while frames follow it (SQLite would ignore and then
    overwrite them): checked before SQLite opens the file."""
    wal = _wal_path(path)
    for _attempt in range(3):  # another server may be rewriting the header this instant: read again
        try:
            size = wal.stat().st_size
            with wal.open("rb") as handle:
                head = handle.read(WAL_HEADER)
        except FileNotFoundError:
            return None
        if size <= WAL_HEADER or len(head) < WAL_HEADER:
            return None
        found = Diagnosis()
        if _wal_header(head, size, None, found) or not found.damaged:
            return None
    return found.findings[0].text


# -- the header ---------------------------------------------------------------------------


def _header(path: Path, size: int, found: Diagnosis, *, whole: bool) -> int | None:
    """The header's magic and page size; with `whole` (no write-ahead log holds a newer page 1)
    also its format bytes and its page count against the file's size."""
    with path.open("rb") as handle:
        head = handle.read(100)
    add = found.findings.append
    if len(head) < 100 and not whole:
        return None
    if len(head) < 100:
        add(Finding("header", f"the file is {size} bytes, shorter than SQLite's 100-byte header (truncated)"))
        return None
    if head[:16] != MAGIC:
        add(Finding("header", "not a SQLite database: the file does not start with 'SQLite format 3'"))
        return None
    raw = struct.unpack(">H", head[16:18])[0]
    page_size = 65536 if raw == 1 else raw
    if page_size < 512 or page_size & (page_size - 1):
        add(Finding("header", f"the page size field (bytes 16-17) holds {raw}: not a power of two from 512"))
        return None
    if not whole:
        return page_size
    if head[18] not in (1, 2) or head[19] not in (1, 2):
        add(Finding("header", f"file format bytes 18-19 are {head[18]}, {head[19]} (1 or 2 expected)"))
    if tuple(head[21:24]) != (64, 32, 32):
        add(Finding("header", f"payload fractions (bytes 21-23) are {tuple(head[21:24])}, not (64, 32, 32)"))
    schema_format = struct.unpack(">I", head[44:48])[0]
    if not 1 <= schema_format <= 4:
        add(Finding("header", f"schema format number (bytes 44-47) is {schema_format}, not 1-4"))
    if size % page_size:
        add(Finding("header", f"truncated: the file ends {size % page_size} bytes into a page"))
    counter, valid_for = head[24:28], head[92:96]
    pages = struct.unpack(">I", head[28:32])[0]
    if counter == valid_for and pages * page_size > size:
        add(
            Finding(
                "header", f"truncated: the header counts {pages} pages, the file holds {size // page_size}"
            )
        )
    return page_size


# -- the write-ahead log ------------------------------------------------------------------


def _wal_path(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _checksum(data: bytes, big_endian: bool, s0: int = 0, s1: int = 0) -> tuple[int, int]:
    words = struct.unpack(f"{'>' if big_endian else '<'}{len(data) // 4}I", data)
    mask = 0xFFFFFFFF
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & mask
        s1 = (s1 + words[i + 1] + s0) & mask
    return s0, s1


def _wal_header(head: bytes, size: int, page_size: int | None, found: Diagnosis) -> bool:
    magic, version, wal_page, _seq, _salt1, _salt2, c0, c1 = struct.unpack(">8I", head)
    frames = (size - WAL_HEADER) // FRAME_HEADER  # at least this many bytes of frames follow
    problem = None
    if magic not in WAL_MAGICS:
        problem = "its magic number is wrong"
    elif _checksum(head[:24], magic & 1 == 1) != (c0, c1):
        problem = "its header checksum does not match"
    elif version != 3007000:
        problem = f"its format version is {version}"
    elif page_size is not None and wal_page != page_size:
        problem = f"its page size {wal_page} differs from the database's {page_size}"
    if problem is None:
        return True
    found.findings.append(
        Finding(
            "wal",
            f"the write-ahead log's header is damaged ({problem}): SQLite ignores all of its "
            f"{size - WAL_HEADER} bytes of frames, and the transactions in them are lost"
            if frames
            else f"the write-ahead log's header is damaged ({problem}); it holds no frames",
            damage=frames > 0,
        )
    )
    return False


def _wal(path: Path, page_size: int | None, found: Diagnosis) -> None:
    wal = _wal_path(path)
    if not wal.exists():
        return
    data = wal.read_bytes()
    if not data:
        return
    if len(data) < WAL_HEADER:
        found.findings.append(
            Finding("wal", f"the write-ahead log is {len(data)} bytes, shorter than its header")
        )
        return
    if not _wal_header(data[:WAL_HEADER], len(data), page_size, found):
        return
    magic, _v, wal_page, _seq, salt1, salt2, c0, c1 = struct.unpack(">8I", data[:WAL_HEADER])
    page_size = page_size or wal_page
    big = magic & 1 == 1
    frame_size = FRAME_HEADER + page_size
    total = (len(data) - WAL_HEADER) // frame_size
    s0, s1, last_commit, valid = c0, c1, 0, 0
    for index in range(total):
        start = WAL_HEADER + index * frame_size
        header = data[start : start + FRAME_HEADER]
        _page, commit, f_salt1, f_salt2, f0, f1 = struct.unpack(">6I", header)
        if (f_salt1, f_salt2) != (salt1, salt2):
            break  # frames of an earlier generation of the log (before a checkpoint): normal
        s0, s1 = _checksum(header[:8], big, s0, s1)
        s0, s1 = _checksum(data[start + FRAME_HEADER : start + frame_size], big, s0, s1)
        if (s0, s1) != (f0, f1):
            later = (  # each later frame's commit field and salts
                struct.unpack(">3I", data[at + 4 : at + 16])
                for at in range(start + frame_size, WAL_HEADER + total * frame_size, frame_size)
            )
            if not any(done and (one, two) == (salt1, salt2) for done, one, two in later):
                # no commit of this log's generation after it: a frame of the transaction being
                # written when the process stopped (its header written, its page not, or a page
                # rewritten in place), which never committed; frames of other salts after it are
                # an earlier generation's
                found.findings.append(
                    Finding(
                        "wal",
                        f"write-ahead log frame {index + 1} of {total} was cut short by a stop in"
                        " mid-write: SQLite ignores it and what follows, no commit among them",
                        False,
                    )
                )
                return
            found.findings.append(
                Finding(
                    "wal",
                    f"write-ahead log frame {index + 1} of {total} fails its checksum: SQLite ignores "
                    f"it and the {total - index - 1} frames after it (their transactions are lost)",
                )
            )
            return
        valid = index + 1
        if commit:
            last_commit = valid
    if valid > last_commit:
        found.findings.append(
            Finding("wal", f"{valid - last_commit} log frames after the last commit never committed", False)
        )
    if (len(data) - WAL_HEADER) % frame_size and valid == total:
        found.findings.append(
            Finding("wal", "the write-ahead log ends in a partial frame (a cut-short write)", False)
        )


# -- what SQLite and memhub find inside ---------------------------------------------------


def _one_line(exc: Exception, limit: int = 300) -> str:
    text = " ".join(str(exc).split())  # SQLite may quote a damaged schema, newlines and all
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _count(lines: list[str]) -> str:
    more = "+" if len(lines) >= 20 else ""
    return f"{len(lines)}{more} problem{'s' if len(lines) != 1 else ''}"


def _quote(lines: list[str]) -> str:
    flat = [" ".join(line.split()) for line in lines if not line.startswith("*** in database")]
    return "; ".join(flat[:SHOWN]) + ("; …" if len(flat) > SHOWN else "")


_MISSING_ITEM = "NOT IN (SELECT id FROM items)"
_INVARIANTS = (  # (area, what, count query, how to repair)
    ("text index", "items without their text-index row",
     "SELECT count(*) FROM items WHERE id NOT IN (SELECT rowid FROM items_fts)", "memhub reindex"),
    ("text index", "text-index rows without their item",
     f"SELECT count(*) FROM items_fts WHERE rowid {_MISSING_ITEM}", "memhub reindex"),
    ("vectors", "vectors of missing items",
     f"SELECT count(*) FROM vectors WHERE item_id {_MISSING_ITEM}", "admin cleanup_orphans"),
    ("vectors", "vectors whose size is not their dimension's",
     "SELECT count(*) FROM vectors WHERE length(vec) != dim * 4", "memhub reindex"),
    ("links", "links to missing items",
     f"SELECT count(*) FROM links WHERE src {_MISSING_ITEM} OR dst {_MISSING_ITEM}", "admin cleanup_orphans"),
    ("tags", "tags of missing items",
     f"SELECT count(*) FROM item_tags WHERE item_id {_MISSING_ITEM}", "admin cleanup_orphans"),
)  # fmt: skip
_TEXT = {
    "items": ("title", "body", "norm_text", "tags", "attrs", "owner", "kind", "scope", "created_at"),
    "events": ("at", "principal", "tool", "outcome", "detail", "prev_hash", "hash"),
    "projects": ("name",),
    "principals": ("id",),
}


def _contents(path: Path, tables: set[str], found: Diagnosis) -> None:
    add = found.findings.append
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        add(Finding("sqlite", f"SQLite cannot open the file: {_one_line(exc)}"))
        found.openable = False
        return
    conn.text_factory = bytes
    try:
        lines = [r[0].decode("utf-8", "replace") for r in conn.execute("PRAGMA integrity_check(20)")]
        if lines != ["ok"]:
            add(Finding("integrity", f"SQLite's integrity check reports {_count(lines)}: {_quote(lines)}"))
            found.openable = False
            return
        listed = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        present = {r[0].decode("utf-8", "replace") for r in listed}
        missing = sorted(tables - present)
        if missing:
            add(
                Finding(
                    "tables", f"memhub tables missing: {', '.join(missing)} (damaged, or not a memhub store)"
                )
            )
            found.openable = False
            return
        for area, what, sql, fix in _INVARIANTS:
            count = int(conn.execute(sql).fetchone()[0])
            if count:
                add(Finding(area, f"{count} {what} (repair: {fix})"))
        for table, columns in _TEXT.items():
            _text_readable(conn, table, columns, found)
    except sqlite3.Error as exc:
        add(Finding("sqlite", f"SQLite cannot read the file: {_one_line(exc)}"))
        found.openable = False
    except UnicodeDecodeError:  # SQLite's own message quotes damaged schema bytes
        add(Finding("sqlite", "SQLite cannot read the file: its schema holds bytes that are not text"))
        found.openable = False
    finally:
        conn.close()


def _text_readable(conn: sqlite3.Connection, table: str, columns: tuple[str, ...], found: Diagnosis) -> None:
    """Rows whose text is not valid UTF-8: bytes changed on disk where no structure notices."""
    bad: list[str] = []
    count = 0
    for row in conn.execute(f"SELECT rowid, {', '.join(columns)} FROM {table}"):
        for column, value in zip(columns, row[1:], strict=True):
            if isinstance(value, bytes):
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    count += 1
                    if len(bad) < SHOWN:
                        bad.append(f"row {row[0]} {column}")
                    break
    if count:
        shown = ", ".join(bad) + (", …" if count > len(bad) else "")
        found.findings.append(
            Finding("text", f"{count} {table} rows hold bytes that are not UTF-8 text ({shown})")
        )
