"""SqliteStore.read_pair: the second reader is given only where both snapshots are one. In WAL
mode a reader's snapshot starts at its first read, so a commit that lands between the two first
reads would give them different snapshots: the probe sees it and the second is given up."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memhub.core.errors import ErrorKind, MemhubError
from memhub.core.models import Viewer
from memhub.store.base import ItemQuery, NewItem
from memhub.store.sqlite.database import IDLE_PARTNERS, SqliteStore

EVERYONE = Viewer("alice", "2026-01-01T00:00:00Z")


def _add(store: SqliteStore, body: str) -> int:
    with store.transaction(write=True) as tx:
        return tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body=body)).id


def test_a_commit_between_the_two_first_reads_gives_up_the_second(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "pair.db")
    other = SqliteStore(tmp_path / "pair.db")  # another process, in effect
    first = _add(store, "first")
    landed: list[int] = []

    def commit_now(statement: str) -> None:  # the second reader's BEGIN: another writer commits
        if statement == "BEGIN" and not landed:
            landed.append(_add(other, "landed in between"))

    spare = store._partner()  # the idle second reader the next pair takes
    spare.set_trace_callback(commit_now)
    store._release_partner(spare)
    with store.read_pair() as (tx, second):
        assert landed and second is None
        assert [r.id for r in tx.query_items(EVERYONE, ItemQuery())] == [first]  # its snapshot
    spare.set_trace_callback(None)
    with store.read_pair() as (tx, second):  # the reader went back to the pool, and is given now
        assert second is not None
        for each in (tx, second):
            assert [r.id for r in each.query_items(EVERYONE, ItemQuery())] == [first, landed[0]]
    other.close()
    store.close()


def test_a_commit_of_this_process_between_them_is_seen_too(tmp_path: Path) -> None:
    """The probe is a connection of its own: this process's writer's commits change it too."""
    store = SqliteStore(tmp_path / "pair.db")
    _add(store, "first")
    landed: list[int] = []
    spare = store._partner()
    spare.set_trace_callback(
        lambda s: landed.append(_add(store, "mine")) if s == "BEGIN" and not landed else None
    )
    store._release_partner(spare)
    with store.read_pair() as (tx, second):
        assert landed and second is None
        assert tx.count_items(EVERYONE, ItemQuery()) == 1
    store.close()


def test_the_second_readers_are_reused_and_closed_with_the_store(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "pair.db")
    _add(store, "first")
    seconds = set()
    for _ in range(5):
        with store.read_pair() as (_, second):
            assert second is not None
            seconds.add(id(second.conn))
    assert len(seconds) == 1  # one after the other: one connection
    store.close()
    with pytest.raises(MemhubError) as raised, store.read_pair():  # as a closed store's reads do
        pass
    assert raised.value.kind == ErrorKind.STORAGE


def test_a_commit_just_before_the_probe_is_seen_by_both_readers(tmp_path: Path) -> None:
    """The probe is read before either first read: a commit that lands as it is read is in
    both snapshots (or, were the order otherwise, the second would have to be given up)."""
    store = SqliteStore(tmp_path / "pair.db")
    other = SqliteStore(tmp_path / "pair.db")
    _add(store, "first")
    store._committed()  # opens the probe
    probe = store._probe
    assert probe is not None
    landed: list[int] = []

    def commit_now(statement: str) -> None:
        if statement.startswith("PRAGMA data_version") and not landed:
            landed.append(_add(other, "landed at the probe"))

    probe.set_trace_callback(commit_now)
    with store.read_pair() as (tx, second):
        assert landed
        ids = [r.id for r in tx.query_items(EVERYONE, ItemQuery())]
        assert landed[0] in ids
        assert second is not None  # the commit came before the probe's first read
        assert [r.id for r in second.query_items(EVERYONE, ItemQuery())] == ids
    probe.set_trace_callback(None)
    other.close()
    store.close()


def test_after_a_burst_only_a_few_second_readers_stay_open(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "pair.db")
    burst = [store._partner() for _ in range(IDLE_PARTNERS + 2)]  # searches at once
    for conn in burst:
        store._release_partner(conn)
    kept = [conn for conn in burst if conn in store._partners]
    assert len(kept) == IDLE_PARTNERS
    for conn in burst:
        if conn not in kept:
            with pytest.raises(sqlite3.ProgrammingError):  # closed
                conn.execute("SELECT 1")
    store.close()
