"""The optional protocols of a store: Backups, Checks (SQLite's alone: their tests skip on the
other backends, through tests/store/backends.sqlite_only), FileSize, ChangeProbe (every backend)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memhub.audit.chain import verify_chain
from memhub.store.base import BACKUP_PARTS, Backups, ChangeProbe, Checks, FileSize, ItemQuery, Store
from memhub.store.open import open_store
from tests.store.backends import skip_unless_sqlite
from tests.store.contract import OpenStore, Seed, TickClock, viewer

ALICE = viewer("alice")


SQLITE_ONLY = {Backups: "backups", Checks: "file checks"}  # features of backends.SQLITE_ONLY


def needs(store: Store, protocol: type) -> None:
    """Skip a test of a SQLite-only protocol on another backend; every other gap is a failure."""
    if protocol in SQLITE_ONLY:
        skip_unless_sqlite(SQLITE_ONLY[protocol])
    assert isinstance(store, protocol), f"{type(store).__name__} does not implement {protocol.__name__}"


def content(store: Store) -> tuple[list[tuple[int, str, str]], list[tuple[int, int, str]], int]:
    """(items, links among them, events) as alice sees them."""
    with store.transaction(write=False) as tx:
        items = [(r.id, r.kind, r.body) for r in tx.query_items(ALICE, ItemQuery(limit=1000))]
        links = sorted((x.src, x.dst, x.type) for x in tx.links_of([i for i, _, _ in items], []))
    return items, links, sum(1 for _ in store.iter_events())


@pytest.fixture
def filled(store: Store, seed: Seed) -> Store:
    project = seed.project("demo")
    memory = seed.item("a memory")
    topic = seed.item("a topic", kind="topic", scope="project", project_id=project)
    seed.session("s1")
    with store.transaction(write=True) as tx:
        tx.upsert_link(memory.id, topic.id, "association", "semantic", 0.5)
        tx.upsert_link(topic.id, memory.id, "relation", "cites", 0.5)
        tx.append_event("alice", "remember", "ok", {"id": memory.id})
    return store


def test_backup_is_a_verified_copy(filled: Store, tmp_path: Path, backend_keys: tuple[bytes, ...]) -> None:
    needs(filled, Backups)
    assert isinstance(filled, Backups)
    target = tmp_path / "copy.db"
    filled.backup_to(target)
    assert filled.verify_backup(target) == []
    copy = open_store(target, clock=TickClock(), keys=backend_keys)
    try:
        assert content(copy) == content(filled)
    finally:
        copy.close()


def test_backup_without_memories(filled: Store, tmp_path: Path, backend_keys: tuple[bytes, ...]) -> None:
    needs(filled, Backups)
    assert isinstance(filled, Backups)
    before = content(filled)
    target = tmp_path / "no-memories.db"
    filled.backup_to(target, exclude=["memories"])
    assert filled.verify_backup(target) == []
    assert content(filled) == before  # the live store keeps everything
    copy = open_store(target, clock=TickClock(), keys=backend_keys)
    try:
        items, links, events = content(copy)
        assert [kind for _, kind, _ in items] == ["topic"]
        assert links == []  # the memory's links went with it
        assert events == before[2]
        with copy.transaction(write=False) as tx:
            assert tx.get_project_by_name("demo") is not None
    finally:
        copy.close()


def test_backup_rejects_unknown_parts(store: Store, tmp_path: Path) -> None:
    needs(store, Backups)
    assert isinstance(store, Backups)
    assert "memories" in BACKUP_PARTS
    with pytest.raises(ValueError):
        store.backup_to(tmp_path / "x.db", exclude=["memories", "everything"])


def test_verify_backup_rejects_garbage_and_missing_files(store: Store, tmp_path: Path) -> None:
    needs(store, Backups)
    assert isinstance(store, Backups)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all\n" * 200)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert store.verify_backup(garbage) != []
    assert store.verify_backup(empty) != []
    assert store.verify_backup(tmp_path / "missing.db") != []
    assert not (tmp_path / "missing.db").exists()  # checking does not create the file


def test_restore_brings_back_the_old_content(filled: Store, seed: Seed, tmp_path: Path) -> None:
    needs(filled, Backups)
    assert isinstance(filled, Backups)
    before = content(filled)
    target = tmp_path / "before.db"
    filled.backup_to(target)
    seed.item("written after the backup")
    with filled.transaction(write=True) as tx:
        tx.delete_items([before[0][0][0]])
        tx.append_event("alice", "forget", "ok", {})
    assert content(filled) != before
    filled.restore_from(target)
    assert content(filled) == before
    with filled.transaction(write=True) as tx:  # still usable for writes
        tx.append_event("alice", "remember", "ok", {})
    assert verify_chain(filled.iter_events()).ok


def test_checks_on_a_healthy_store(filled: Store) -> None:
    needs(filled, Checks)
    assert isinstance(filled, Checks)
    assert filled.integrity_check() == []
    assert filled.quick_check() is True
    assert filled.quick_check(max_age_s=60.0) is True


def test_file_size(filled: Store) -> None:
    needs(filled, FileSize)
    assert isinstance(filled, FileSize)
    assert filled.file_size() > 0


def test_change_probe_sees_other_connections_commit(store: Store, open_more: OpenStore) -> None:
    needs(store, ChangeProbe)
    assert isinstance(store, ChangeProbe)
    other = open_more()
    before = store.data_version()
    assert store.data_version() == before  # nothing happened
    with other.transaction(write=True) as tx:
        tx.append_event("bob", "remember", "ok", {})
    assert store.data_version() != before
