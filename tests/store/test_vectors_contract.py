"""VectorsTx and the Store's vector change feeds (what other processes' indexes follow)."""

from __future__ import annotations

import struct

from memhub.store.base import NewItem, Store, VectorChange
from tests.store.contract import OpenStore, Seed


def vec(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def test_put_get_count(store: Store, seed: Seed) -> None:
    a = seed.item("a")
    b = seed.item("b")
    with store.transaction(write=True) as tx:
        assert tx.put_vector(a.id, "e1", vec(1, 0), 2) is True
        assert tx.put_vector(b.id, "e1", vec(0, 1), 2) is True
        assert tx.put_vector(a.id, "e2", vec(1, 0, 0), 3) is True
    with store.transaction(write=True) as tx:
        assert tx.get_vector(a.id, "e1") == vec(1, 0)
        assert tx.get_vector(a.id, "e2") == vec(1, 0, 0)
        assert tx.get_vector(b.id, "e2") is None
        assert tx.get_vector(a.id, "other") is None
        assert (tx.vector_count("e1"), tx.vector_count("e2"), tx.vector_count("other")) == (2, 1, 0)
        assert tx.put_vector(a.id, "e1", vec(0.6, 0.8), 2) is True  # replaces
    with store.transaction(write=False) as tx:
        assert tx.get_vector(a.id, "e1") == vec(0.6, 0.8)
        assert tx.vector_count("e1") == 2
        assert tx.get_vectors([a.id, b.id, 999_999], "e1") == {a.id: vec(0.6, 0.8), b.id: vec(0, 1)}
        assert tx.get_vectors([a.id, b.id], "e2") == {a.id: vec(1, 0, 0)}
        assert tx.get_vectors([], "e1") == {}


def test_missing_vectors(store: Store, seed: Seed) -> None:
    rows = seed.items(
        [
            NewItem(kind="memory", owner="alice", scope="global", body=f"body {n}", title=f"title {n}")
            for n in range(5)
        ]
    )
    secret = seed.item("hidden body", owner="bob", scope="user", boundary_class="secret")
    ids = [r.id for r in rows]
    with store.transaction(write=True) as tx:
        tx.put_vector(ids[1], "e1", vec(1), 1)
        tx.put_vector(ids[3], "e2", vec(1), 1)
    with store.transaction(write=False) as tx:
        missing = tx.missing_vectors("e1", 100)
        after = tx.missing_vectors("e1", 100, after_id=ids[2])
        limited = tx.missing_vectors("e1", 2)
        among = tx.missing_vectors("e1", 100, ids=[ids[1], ids[4], 999_999])
        e2 = tx.missing_vectors("e2", 100)
    # every item needs a vector, whoever may read it
    assert [i for i, _ in missing] == [ids[0], ids[2], ids[3], ids[4], secret.id]
    texts = dict(missing)
    assert "title 0" in texts[ids[0]] and "body 0" in texts[ids[0]]
    assert "hidden body" in texts[secret.id]
    assert [i for i, _ in after] == [ids[3], ids[4], secret.id]
    assert [i for i, _ in limited] == [ids[0], ids[2]]
    assert [i for i, _ in among] == [ids[4]]
    assert [i for i, _ in e2] == [*ids[:3], ids[4], secret.id]


def test_put_vector_for_a_deleted_item_writes_nothing(store: Store, seed: Seed) -> None:
    a = seed.item("a")
    gone = seed.item("gone")
    with store.transaction(write=True) as tx:
        tx.put_vector(a.id, "e1", vec(1), 1)
        tx.delete_items([gone.id])
    high, _ = store.vector_changes("e1", 0)
    with store.transaction(write=True) as tx:
        assert tx.put_vector(gone.id, "e1", vec(1), 1) is False
        assert tx.put_vector(999_999, "e1", vec(1), 1) is False
    with store.transaction(write=False) as tx:
        assert tx.get_vector(gone.id, "e1") is None
        assert tx.vector_count("e1") == 1
    assert store.vector_changes("e1", high) == (high, [])
    assert store.vector_deletions("e1", high) == (high, [])


def test_vector_change_feed(store: Store, seed: Seed) -> None:
    a = seed.item("apples")
    b = seed.item("bananas")
    assert store.vector_changes("e1", 0) == (0, [])
    with store.transaction(write=True) as tx:
        tx.put_vector(a.id, "e1", vec(1, 0), 2)
        tx.put_vector(b.id, "e1", vec(0, 1), 2)
        tx.put_vector(a.id, "e2", vec(1), 1)
    high, changes = store.vector_changes("e1", 0)
    assert [(c.item_id, c.vec) for c in changes] == [(a.id, vec(1, 0)), (b.id, vec(0, 1))]
    assert high == max(c.seq for c in changes) and all(isinstance(c, VectorChange) for c in changes)
    assert [c.seq for c in changes] == sorted(c.seq for c in changes)
    assert store.vector_changes("e1", high) == (high, [])  # nothing new past the high-water mark
    assert store.vector_deletions("e1", high) == (high, [])

    with store.transaction(write=True) as tx:
        tx.put_vector(b.id, "e1", vec(0.6, 0.8), 2)
    high2, changes = store.vector_changes("e1", high)
    assert high2 > high
    assert [(c.item_id, c.vec) for c in changes] == [(b.id, vec(0.6, 0.8))]  # the latest per item

    # a text update drops the item's vectors, and the feeds say so
    with store.transaction(write=True) as tx:
        tx.update_item(a.id, {"body": "apricots"})
        assert tx.get_vector(a.id, "e1") is None
        assert tx.get_vector(a.id, "e2") is None
        assert [i for i, _ in tx.missing_vectors("e1", 10)] == [a.id]
    high3, changes = store.vector_changes("e1", high2)
    assert high3 > high2
    assert [(c.item_id, c.vec) for c in changes] == [(a.id, None)]
    deleted_high, deleted = store.vector_deletions("e1", high2)
    assert (deleted_high, deleted) == (high3, [a.id])
    assert store.vector_deletions("e2", 0)[1] == [a.id]

    # a change that touches no text keeps the vectors
    with store.transaction(write=True) as tx:
        tx.update_item(b.id, {"importance": 0.9})
        assert tx.get_vector(b.id, "e1") == vec(0.6, 0.8)
    assert store.vector_changes("e1", high3) == (high3, [])

    # deleting an item deletes its vectors
    with store.transaction(write=True) as tx:
        tx.delete_items([b.id])
    high4, changes = store.vector_changes("e1", high3)
    assert [(c.item_id, c.vec) for c in changes] == [(b.id, None)]
    assert store.vector_deletions("e1", high3) == (high4, [b.id])
    # read from the start, the feed gives each item's latest state
    assert {(c.item_id, c.vec) for c in store.vector_changes("e1", 0)[1]} == {(a.id, None), (b.id, None)}


def test_feeds_follow_another_store(store: Store, seed: Seed, open_more: OpenStore) -> None:
    a = seed.item("a")
    other = open_more()
    with other.transaction(write=True) as tx:
        assert tx.put_vector(a.id, "e1", vec(1), 1)
    high, changes = store.vector_changes("e1", 0)
    assert [(c.item_id, c.vec) for c in changes] == [(a.id, vec(1))]
    with other.transaction(write=True) as tx:
        tx.delete_items([a.id])
    assert store.vector_deletions("e1", high)[1] == [a.id]


def test_vector_change_feed_in_pages(store: Store, seed: Seed) -> None:
    """A page reads at most `limit` entries of the log; applied in order, the pages end in the
    state one unbounded read gives (an item changed again later shows up again)."""
    items = [seed.item(f"item {n}").id for n in range(7)]
    with store.transaction(write=True) as tx:
        for n, item in enumerate(items):
            tx.put_vector(item, "e1", vec(float(n)), 1)
        tx.put_vector(items[1], "e1", vec(10.0), 1)  # item 1 again: its latest state is now last
        tx.put_vector(items[1], "e1", vec(11.0), 1)  # twice in the third page: once in it
        tx.delete_items([items[4]])
    whole_high, whole = store.vector_changes("e1", 0)
    pages: list[list[VectorChange]] = []
    high = 0
    while True:
        high, page = store.vector_changes("e1", high, limit=3)
        assert len(page) <= 3
        if not page:
            break
        pages.append(page)
    assert [len(p) for p in pages] == [3, 3, 2, 1]  # 10 entries: 7 puts, item 1 twice, a delete
    assert high == whole_high
    state: dict[int, bytes | None] = {}
    for change in (c for p in pages for c in p):
        state[change.item_id] = change.vec
    assert state == {c.item_id: c.vec for c in whole}
    assert [(c.item_id, c.vec) for c in whole][-2:] == [(items[1], vec(11.0)), (items[4], None)]
    assert [(c.item_id, c.vec) for c in pages[0]][1] == (items[1], vec(11.0))  # as it is now
    assert [(c.item_id, c.vec) for c in pages[2]] == [(items[6], vec(6.0)), (items[1], vec(11.0))]
    assert [(c.item_id, c.vec) for c in pages[3]] == [(items[4], None)]
    assert [c.seq for p in pages for c in p] == sorted(c.seq for p in pages for c in p)
    assert store.vector_changes("e1", 0, limit=None) == (whole_high, whole)
