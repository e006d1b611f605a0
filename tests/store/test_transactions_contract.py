"""Store.transaction: a failed write changes nothing; a read sees one snapshot and never waits."""

from __future__ import annotations

import threading

import pytest

from memhub.core.models import ProjectRole
from memhub.store.base import ItemQuery, NewItem, Store
from tests.store.contract import ALL_CLASSES, OpenStore, Seed, viewer

EVERYONE = viewer("alice", boundaries=ALL_CLASSES)


def test_a_write_that_raises_changes_nothing(store: Store, seed: Seed) -> None:
    a = seed.item("existing item", tags=["t"])
    b = seed.item("another item")
    project = seed.project("demo")
    with store.transaction(write=True) as tx:
        tx.put_vector(a.id, "e1", b"\x00\x00\x80\x3f", 1)
        tx.append_event("alice", "remember", "ok", {})
        before = tx.table_counts()
    high, _ = store.vector_changes("e1", 0)
    events = list(store.iter_events())

    with pytest.raises(RuntimeError), store.transaction(write=True) as tx:
        new = tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="phantom words"))
        tx.update_item(a.id, {"body": "rewritten", "tags": ["u"]})
        tx.delete_items([b.id])
        tx.upsert_link(a.id, new.id, "association", "semantic", 0.9)
        tx.put_vector(new.id, "e1", b"\x00\x00\x80\x3f", 1)
        tx.insert_project("phantom", None, {}, "alice")
        tx.set_member(project, "bob", ProjectRole.EDITOR)
        tx.create_session("s-phantom", "alice", None, None)
        tx.append_event("alice", "remember", "ok", {"phantom": True})
        raise RuntimeError("the tool call failed half way")

    with store.transaction(write=False) as tx:
        assert tx.table_counts() == before
        assert [r.id for r in tx.query_items(EVERYONE, ItemQuery())] == [a.id, b.id]
        assert tx.get_item(EVERYONE, a.id) == a
        assert tx.text_search(EVERYONE, ["phantom"], (), None, 10) == []
        assert [i for i, _ in tx.text_search(EVERYONE, ["existing"], (), None, 10)] == [a.id]
        assert tx.text_search(EVERYONE, ["rewritten"], (), None, 10) == []
        assert tx.tag_counts(EVERYONE, ItemQuery(), 10) == {"t": 1}
        assert tx.get_vector(a.id, "e1") is not None
        assert tx.links_of([a.id, b.id], []) == []
        assert tx.get_project_by_name("phantom") is None
        assert tx.member_role(project, "bob") is None
        assert tx.get_session("s-phantom") is None
    assert list(store.iter_events()) == events
    assert store.vector_changes("e1", high) == (high, [])
    assert store.vector_deletions("e1", high) == (high, [])


def test_a_read_sees_one_snapshot(store: Store, seed: Seed, open_more: OpenStore) -> None:
    first = seed.item("first")
    other = open_more()
    with store.transaction(write=False) as tx:
        assert [r.id for r in tx.query_items(EVERYONE, ItemQuery())] == [first.id]
        with other.transaction(write=True) as wtx:  # another process commits meanwhile
            second = wtx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="second"))
            wtx.update_item(first.id, {"body": "first, edited"})
            wtx.append_event("alice", "remember", "ok", {})
        assert [r.id for r in tx.query_items(EVERYONE, ItemQuery())] == [first.id]
        assert tx.get_item(EVERYONE, first.id) == first
        assert tx.count_items(EVERYONE, ItemQuery()) == 1
        assert tx.text_search(EVERYONE, ["second"], (), None, 10) == []
        assert tx.table_counts()["events"] == 0
    with store.transaction(write=False) as tx:
        assert [r.id for r in tx.query_items(EVERYONE, ItemQuery())] == [first.id, second.id]
        edited = tx.get_item(EVERYONE, first.id)
        assert edited is not None and edited.body == "first, edited"


def test_a_read_does_not_wait_for_a_writer(store: Store, seed: Seed, open_more: OpenStore) -> None:
    first = seed.item("first")
    other = open_more()
    with other.transaction(write=True) as wtx:  # holds the writer lock until the block ends
        wtx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="uncommitted"))
        with store.transaction(write=False) as tx:
            assert [r.id for r in tx.query_items(EVERYONE, ItemQuery())] == [first.id]
    with store.transaction(write=False) as tx:
        assert tx.count_items(EVERYONE, ItemQuery()) == 2


def test_a_write_commits_everything_together(store: Store, open_more: OpenStore) -> None:
    with store.transaction(write=True) as tx:
        row = tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="together"))
        tx.append_event("alice", "remember", "ok", {"id": row.id})
        assert tx.get_item(EVERYONE, row.id) == row  # a transaction reads its own writes
    other = open_more()
    with other.transaction(write=False) as tx:
        assert tx.get_item(EVERYONE, row.id) == row
    assert [e.detail for e in other.iter_events()] == [{"id": row.id}]


def test_a_read_pair_sees_one_snapshot(store: Store, seed: Seed, open_more: OpenStore) -> None:
    """`read_pair`: a second read transaction, used on another thread, that sees what the first
    sees, whatever is committed meanwhile."""
    first = seed.item("first")
    other = open_more()
    with store.read_pair() as (tx, second):
        assert second is not None
        with other.transaction(write=True) as wtx:  # another process commits meanwhile
            wtx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="second"))
            wtx.update_item(first.id, {"body": "first, edited"})
        seen: list[object] = []

        def elsewhere() -> None:
            assert second is not None
            seen.append([r.body for r in second.query_items(EVERYONE, ItemQuery())])
            seen.append(second.text_search(EVERYONE, ["second"], (), None, 10))
            seen.append(second.visible_ids(EVERYONE, [first.id, first.id + 1], ("memory",), None))

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert seen == [["first"], [], {first.id}]
        assert [r.body for r in tx.query_items(EVERYONE, ItemQuery())] == ["first"]
        assert tx.now == second.now  # one clock reading: expiry is judged alike
    with store.read_pair() as (tx, second):
        assert second is not None
        for each in (tx, second):
            assert [r.body for r in each.query_items(EVERYONE, ItemQuery())] == ["first, edited", "second"]


def test_a_read_pair_inside_a_read_joins_it(store: Store, seed: Seed, open_more: OpenStore) -> None:
    first = seed.item("first")
    with store.transaction(write=False) as outer:
        assert outer.count_items(EVERYONE, ItemQuery()) == 1
        with open_more().transaction(write=True) as wtx:
            wtx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="later"))
        with store.read_pair() as (tx, second):
            assert second is None  # no second snapshot is promised inside a read
            assert [r.id for r in tx.query_items(EVERYONE, ItemQuery())] == [first.id]
        assert outer.count_items(EVERYONE, ItemQuery()) == 1  # the outer read goes on


def test_read_pairs_at_once_on_many_threads(store: Store, seed: Seed) -> None:
    """Pairs opened and ended on eight threads at once: each sees the store, none waits for
    another, and the second readers are reused afterwards."""
    seed.item("shared")
    outcomes: list[tuple[int, int | None]] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def one() -> None:
        start.wait()
        for _ in range(20):
            with store.read_pair() as (tx, second):
                counts = (
                    tx.count_items(EVERYONE, ItemQuery()),
                    None if second is None else second.count_items(EVERYONE, ItemQuery()),
                )
            with lock:
                outcomes.append(counts)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(outcomes) == 160
    assert {first for first, _ in outcomes} == {1} and {second for _, second in outcomes} <= {1, None}
    with store.read_pair() as (_, second):
        assert second is not None
