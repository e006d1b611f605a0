"""Damaged store files, made here from a real store: truncations, byte flips in the header,
the pages and the write-ahead log, files that are not databases, and valid SQLite files that
break memhub's own invariants. `memhub doctor` names the damage of every one of them without
a traceback; `memhub serve` refuses the ones SQLite reports as damaged (one line on stderr,
non-zero exit) and leaves the file untouched."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp import Client

from memhub.cli.container import build_container
from memhub.cli.main import main
from tests.conftest import make_settings
from tests.helpers import MEMHUB, REPO, ok
from tests.store.backends import BACKENDS, sqlite_only

pytestmark = sqlite_only("file checks")  # damaged SQLite files, whatever the backend under test
PAGE = 4096
WAL_HEADER, FRAME = 32, 24 + PAGE


@dataclass(frozen=True)
class Variant:
    db: Path
    doctor_says: str  # a phrase the doctor's report must contain
    serve_refuses: bool = True


def _source(root: Path) -> tuple[Path, Path]:
    """A store with memories, projects and their audit events: its checkpointed file, and a
    copy taken while it was open (main file + write-ahead log)."""
    home, live = root / "home", root / "live"

    async def fill() -> None:
        container = build_container(
            make_settings(home, BACKENDS["sqlite"], embedder="hash", toolsets=("assoc", "discussion"))
        )
        try:
            async with Client(container.server) as client:
                for i in range(150):
                    await ok(
                        client,
                        "memory",
                        action="store",
                        content=f"メモ {i} データベース設計 " + "x" * 200,
                        domain="user",
                    )
                    if i % 30 == 0:
                        await ok(client, "add-project", name=f"project-{i}")
                live.mkdir()
                for part in ("memhub.db", "memhub.db-wal"):
                    shutil.copy(home / part, live / part)
        finally:
            container.close()

    anyio.run(fill)
    return home / "memhub.db", live


def _variants(clean: Path, live: Path, out: Path) -> Iterator[Variant]:
    rng = random.Random(18)
    db = clean.read_bytes()
    pages = len(db) // PAGE
    main_file, wal = (live / "memhub.db").read_bytes(), (live / "memhub.db-wal").read_bytes()

    def put(name: str, data: bytes, log: bytes | None = None) -> Path:
        folder = out / name
        folder.mkdir(parents=True)
        (folder / "memhub.db").write_bytes(data)
        if log is not None:
            (folder / "memhub.db-wal").write_bytes(log)
        return folder / "memhub.db"

    def flipped(data: bytes, offsets: list[int]) -> bytes:
        copy = bytearray(data)
        for offset in offsets:
            copy[offset] ^= rng.randrange(1, 256)
        return bytes(copy)

    for name, size in [("in-header", 50), ("header-only", 100), ("one-page", PAGE),
                       ("half", pages // 2 * PAGE), ("mid-page", len(db) - 1000)]:  # fmt: skip
        yield Variant(put(f"truncated-{name}", db[:size]), "truncated" if size > 50 else "header")
    yield Variant(put("not-a-database", b"hello, I am a text file\n" * 300), "not a SQLite database")
    for name, offsets in [("magic", [0, 5]), ("page-size", [16]), ("versions", [18, 19]),
                          ("payload-fractions", [21]), ("page-count", [28, 29, 30, 31]),
                          ("schema-format", [44, 45, 46, 47]),
                          ("random", rng.sample(range(16, 100), 6))]:  # fmt: skip
        yield Variant(put(f"header-{name}", flipped(db, offsets)), "header")
    for n in range(4):
        offsets = [rng.randrange(PAGE, len(db)) for _ in range(200)]
        yield Variant(put(f"pages-flipped-{n}", flipped(db, offsets)), "integrity")
    # page 1's b-tree header, cell pointers and cells: the schema table's root
    yield Variant(
        put("schema-flipped", flipped(db, [*rng.sample(range(100, 116), 6), PAGE - 3, PAGE - 7])), "sqlite"
    )
    for name, filler in [("zeroed", bytes(PAGE)), ("garbage", rng.randbytes(PAGE))]:
        page = rng.randrange(2, pages)
        yield Variant(put(f"{name}-page", db[: page * PAGE] + filler + db[(page + 1) * PAGE :]), "")
    yield Variant(put("wal-header", main_file, flipped(wal, [3, 10])), "write-ahead log's header is damaged")
    yield Variant(
        put("wal-garbage", main_file, rng.randbytes(len(wal))), "write-ahead log's header is damaged"
    )
    frame_two = WAL_HEADER + FRAME + 24 + 100
    yield Variant(
        put("wal-frame-flipped", main_file, flipped(wal, [frame_two])), "frame 2 of", serve_refuses=False
    )
    yield Variant(
        put("wal-truncated", main_file, wal[: WAL_HEADER + FRAME * 2 + FRAME // 2]),
        "partial frame",
        serve_refuses=False,
    )
    # a stop in mid-write after the log was restarted: frame 3's header is written, its page is
    # still an earlier generation's, and the frames after it are that generation's (other salts)
    torn = bytearray(wal[: WAL_HEADER + FRAME * 6])
    torn[WAL_HEADER + FRAME * 2 + 24 :] = flipped(bytes(torn[WAL_HEADER + FRAME * 2 + 24 :]), [100, 2000])
    for frame in range(3, 6):
        salt = WAL_HEADER + FRAME * frame + 8
        torn[salt : salt + 8] = bytes(b ^ 0x5A for b in torn[salt : salt + 8])
    yield Variant(put("wal-last-frame-torn", main_file, bytes(torn)), "was cut short", serve_refuses=False)
    for name, sql, says, refused in [
        ("missing-tables", "DROP TABLE events", "tables missing: events", True),
        ("index-rows-missing", "DELETE FROM items_fts WHERE rowid IN (SELECT id FROM items LIMIT 5)",
         "5 items without their text-index row", False),
        ("vectors-orphaned",
         "INSERT INTO vectors(item_id, embedder, dim, vec) VALUES (999999, 'hash', 2, x'00')",
         "1 vectors of missing items", False),
        ("chain-edited", "DROP TRIGGER events_no_update; UPDATE events SET outcome = 'x' WHERE id = 3",
         "BROKEN", False),
    ]:  # fmt: skip
        path = put(name, db)
        with sqlite3.connect(path) as conn:
            conn.executescript(sql)
        conn.close()
        yield Variant(path, says, serve_refuses=refused)


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> list[Variant]:
    root = tmp_path_factory.mktemp("corrupt")
    clean, live = _source(root)
    return list(_variants(clean, live, root / "variants"))


def _sha(path: Path) -> str:
    """The store's bytes: the file and its write-ahead log (SQLite's -shm index is not data)."""
    parts = [p for p in (path, path.with_name(path.name + "-wal")) if p.exists() and p.stat().st_size]
    return hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in parts)).hexdigest()


def _run(capsys: pytest.CaptureFixture[str], fn: Callable[[], int]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = fn()
    out, err = capsys.readouterr()
    return code, out, err


def test_doctor_names_the_damage_of_every_copy(
    variants: list[Variant], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMHUB_EMBEDDER", "none")
    assert len(variants) >= 25
    for variant in variants:
        code, out, err = _run(capsys, lambda v=variant: main(["--db", str(v.db), "doctor"]))  # type: ignore[misc]
        report = out + err
        assert "Traceback" not in report, (variant.db.parent.name, report)
        named = [line for line in out.splitlines()[2:] if line.startswith("  ")]
        assert named, (variant.db.parent.name, report)  # one line at least says what is wrong
        assert variant.doctor_says in report, (variant.db.parent.name, report)
        if variant.db.parent.name not in ("wal-truncated", "wal-last-frame-torn"):  # a crash's, not damage
            assert code == 1, (variant.db.parent.name, report)


def test_serve_refuses_a_damaged_store_and_leaves_it_alone(
    variants: list[Variant], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMHUB_EMBEDDER", "none")
    refused = [v for v in variants if v.serve_refuses]
    assert len(refused) >= 20
    for variant in refused:
        before = _sha(variant.db)
        args = ["--db", str(variant.db), "--user", "alice", "serve", "--transport", "stdio"]
        code, out, err = _run(capsys, lambda a=args: main(a))  # type: ignore[misc]
        assert code != 0 and out == "", (variant.db.parent.name, err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("memhub: "), (
            variant.db.parent.name,
            err,
        )
        assert "Traceback" not in err
        assert _sha(variant.db) == before, variant.db.parent.name  # nothing written to it


def test_serve_refusal_over_a_real_process(variants: list[Variant]) -> None:
    """The same through the installed command: exit 2, one line, no traceback, no write."""
    by_name = {v.db.parent.name: v for v in variants}
    for name in ("header-magic", "pages-flipped-0", "wal-header", "missing-tables"):
        db = by_name[name].db
        before = _sha(db)
        done = subprocess.run(
            [
                MEMHUB,
                "--db",
                str(db),
                "--user",
                "alice",
                "serve",
                "--transport",
                "stdio",
                "--embedder",
                "none",
            ],
            input="",
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and done.stdout == "", (name, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "damaged" in done.stderr or "cannot open" in done.stderr, done.stderr
        assert _sha(db) == before
