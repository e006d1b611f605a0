"""Store.transaction: a failed write changes nothing; a read sees one snapshot and never waits."""

from __future__ import annotations

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
