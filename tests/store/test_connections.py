"""The connection model: one writer, a reader per thread. A read never waits behind a write of
the same process, sees every write committed before it began (by any thread), and `close()`
releases every connection. Before this model (one connection and one lock per process) an
in-process read waited 0.90 s behind a 1 s write."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from memhub.core.errors import MemhubError
from memhub.store.base import ItemQuery, NewItem, Store
from memhub.store.open import open_store
from tests.store.contract import Seed, TickClock, viewer

T = TypeVar("T")
DEADLINE_S = 10.0  # a bound for the test, never a sleep: each wait returns as soon as its event fires


@contextmanager
def write_held_open(store: Store, body: str) -> Iterator[threading.Thread]:
    """A write transaction that has inserted an item and stays open until the block ends."""
    holding, release = threading.Event(), threading.Event()

    def write() -> None:
        with store.transaction(write=True) as tx:
            tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body=body))
            holding.set()
            release.wait(DEADLINE_S)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert holding.wait(DEADLINE_S), "the write transaction did not start"
        yield writer
    finally:
        release.set()
        writer.join(DEADLINE_S)


def in_other_thread(fn: Callable[[], T]) -> T:
    """Run `fn` on a fresh thread (which has ended when this returns); its exception is raised
    here. Fails, instead of hanging, if `fn` does not finish in time."""
    done = threading.Event()
    out: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except MemhubError as exc:  # handed to the caller's thread
            failed.append(exc)
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert done.wait(DEADLINE_S), "the read waited for the writer"
    thread.join()
    if failed:
        raise failed[0]
    return out[0]


def bodies(store: Store) -> list[str]:
    with store.transaction(write=False) as tx:
        return [row.body for row in tx.query_items(viewer(), ItemQuery(limit=100))]


def test_a_read_does_not_wait_behind_a_write_of_the_same_process(store: Store) -> None:
    Seed(store).item("committed before")
    with write_held_open(store, "still open") as writer:
        seen = in_other_thread(lambda: bodies(store))  # from a thread that never read before
        assert seen == ["committed before"]  # the open write is not visible yet...
        assert bodies(store) == ["committed before"]  # ...nor from this thread
        assert writer.is_alive()  # both reads finished while the write was held
    assert bodies(store) == ["committed before", "still open"]


def test_reads_see_writes_committed_by_other_threads(store: Store) -> None:
    with ThreadPoolExecutor(max_workers=1) as reader:  # one thread: its connection stays open
        assert reader.submit(bodies, store).result(DEADLINE_S) == []
        for n in range(1, 4):
            in_other_thread(lambda n=n: Seed(store).item(f"write {n}"))  # type: ignore[misc]
            assert reader.submit(bodies, store).result(DEADLINE_S) == [f"write {i}" for i in range(1, n + 1)]
            assert bodies(store)[-1] == f"write {n}"


def test_substring_filters_work_on_every_connection(store: Store) -> None:
    """`contains` decrypts in SQL on an encrypted store: every reader has the function."""
    Seed(store).item("the retry budget is three")
    Seed(store).item("unrelated")
    query = ItemQuery(contains=["retry budget"])

    def matches() -> list[str]:
        with store.transaction(write=False) as tx:
            return [row.body for row in tx.query_items(viewer(), query)]

    assert matches() == ["the retry budget is three"]
    with ThreadPoolExecutor(max_workers=3) as pool:
        assert [f.result(DEADLINE_S) for f in [pool.submit(matches) for _ in range(6)]] == [
            ["the retry budget is three"]
        ] * 6


def _open_files(path: Path) -> int:
    """File descriptors of this process on the database file or its WAL."""
    names = {str(path), f"{path}-wal"}
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            count += os.readlink(fd) in names
        except OSError:
            continue
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_close_closes_every_connection_and_ended_threads_release_theirs(tmp_path: Path) -> None:
    path = tmp_path / "memhub.db"
    store = open_store(path, clock=TickClock())
    Seed(store).item("x")
    alone = _open_files(path)  # the writer (and the first read of this thread)
    for _ in range(6):  # six short-lived threads, one read each
        in_other_thread(lambda: bodies(store))
    with ThreadPoolExecutor(max_workers=1) as reader:
        reader.submit(bodies, store).result(DEADLINE_S)
        # the ended threads' readers were closed when this one opened: at most one more
        assert _open_files(path) <= alone + 2
        store.close()
        assert _open_files(path) == 0
        with pytest.raises(MemhubError):
            reader.submit(bodies, store).result(DEADLINE_S)  # a thread that had a reader
    with pytest.raises(MemhubError):
        in_other_thread(lambda: bodies(store))  # a thread that never read


def _sqlite_heap_bytes() -> int | None:
    """SQLite's own heap in this process (sqlite3_status64 MEMORY_USED), or None."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    except OSError:
        return None
    current, highest = ctypes.c_int64(), ctypes.c_int64()
    if lib.sqlite3_status64(0, ctypes.byref(current), ctypes.byref(highest), 0) != 0:
        return None
    return current.value


@pytest.mark.parametrize("check", [False, True])
def test_opening_a_store_keeps_none_of_the_pages_its_checks_read(tmp_path: Path, check: bool) -> None:
    """The start-up checks read the file (the key probes scan every item of a plain store,
    `check` the whole file); the writer's cache does not keep those pages afterwards."""
    if _sqlite_heap_bytes() is None:
        pytest.skip("SQLite's memory status is not reachable through ctypes here")
    path = tmp_path / "memhub.db"
    store = open_store(path, clock=TickClock())
    with store.transaction(write=True) as tx:
        for n in range(4000):
            tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body=f"{n} " + "x" * 1000))
    store.close()
    before = _sqlite_heap_bytes()
    reopened = open_store(path, clock=TickClock(), check=check)
    try:
        after = _sqlite_heap_bytes()
        assert before is not None and after is not None
        # the schema and a few statements: well under the 4 MB of items the checks read
        assert after - before < 1_000_000
        assert len(bodies(reopened)) == 100  # and the store reads as before (a page of 100)
    finally:
        reopened.close()
