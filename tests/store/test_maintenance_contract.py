"""MaintenanceTx: rebuilding the text index, dropping vectors, removing orphans, counting rows."""

from __future__ import annotations

from memhub.store.base import ItemQuery, NewItem, Store
from tests.store.contract import ALL_CLASSES, PAST, Seed, viewer

TABLES = {"items", "links", "vectors", "projects", "project_members", "sessions", "principals", "events"}
ORPHANS = {"expired_items", "dangling_links", "dangling_tags", "dangling_vectors", "stale_vectors"}


def test_reindex_text(store: Store, seed: Seed) -> None:
    rows = seed.items(
        [NewItem(kind="memory", owner="alice", scope="global", body=f"word{n} shared") for n in range(7)]
    )
    seed.item("設計の方針", tags=["tagged"])
    with store.transaction(write=True) as tx:
        assert tx.reindex_text(batch=3) == 8
    with store.transaction(write=True) as tx:
        assert tx.reindex_text() == 8  # idempotent
    with store.transaction(write=False) as tx:
        alice = viewer("alice")
        assert {i for i, _ in tx.text_search(alice, ["shared"], (), None, 20)} == {r.id for r in rows}
        assert [i for i, _ in tx.text_search(alice, ["word3"], (), None, 20)] == [rows[3].id]
        assert len(tx.text_search(alice, ["設計"], (), None, 20)) == 1
        assert len(tx.text_search(alice, ["tagged"], (), None, 20)) == 1
    with store.transaction(write=True) as tx:
        tx.delete_items([r.id for r in rows])
        assert tx.reindex_text() == 1


def test_drop_vectors(store: Store, seed: Seed) -> None:
    a = seed.item("a")
    b = seed.item("b")
    with store.transaction(write=True) as tx:
        for item_id in (a.id, b.id):
            tx.put_vector(item_id, "e1", b"\x00\x00\x80\x3f", 1)
            tx.put_vector(item_id, "e2", b"\x00\x00\x80\x3f", 1)
        tx.put_vector(a.id, "e3", b"\x00\x00\x80\x3f", 1)
    high1, _ = store.vector_changes("e1", 0)
    with store.transaction(write=True) as tx:
        assert tx.drop_vectors("e1") == 2
        assert (tx.vector_count("e1"), tx.vector_count("e2"), tx.vector_count("e3")) == (0, 2, 1)
        assert tx.drop_vectors("unknown") == 0
    assert store.vector_deletions("e1", high1)[1] == [a.id, b.id]
    high2, _ = store.vector_changes("e2", 0)
    with store.transaction(write=True) as tx:
        assert tx.drop_vectors(None) == 3
        assert (tx.vector_count("e2"), tx.vector_count("e3")) == (0, 0)
    assert store.vector_deletions("e2", high2)[1] == [a.id, b.id]
    with store.transaction(write=False) as tx:
        assert tx.get_item(viewer("alice"), a.id) is not None  # the items stay


def test_cleanup_orphans(store: Store, seed: Seed) -> None:
    expired = seed.item("expired", expires_at=PAST)
    alive = seed.item("alive")
    with store.transaction(write=True) as tx:
        tx.put_vector(alive.id, "keep", b"\x00\x00\x80\x3f", 1)
        tx.put_vector(alive.id, "old", b"\x00\x00\x80\x3f", 1)
        tx.put_vector(expired.id, "keep", b"\x00\x00\x80\x3f", 1)
        tx.upsert_link(alive.id, expired.id, "association", "semantic", 0.5)
    with store.transaction(write=True) as tx:
        counts = tx.cleanup_orphans("keep")
    assert set(counts) >= ORPHANS
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())
    assert counts["expired_items"] == 1
    assert counts["stale_vectors"] == 1
    everyone = viewer("alice", boundaries=ALL_CLASSES, now="2000-01-01T00:00:00.000000Z")
    with store.transaction(write=True) as tx:
        assert tx.get_item(everyone, expired.id) is None  # gone, not just invisible
        assert tx.links_of([alive.id], []) == []
        assert (tx.vector_count("keep"), tx.vector_count("old")) == (1, 0)
        again = tx.cleanup_orphans(None)
    assert set(again) >= ORPHANS
    assert sum(again.values()) == 0


def test_table_counts(store: Store, seed: Seed) -> None:
    with store.transaction(write=False) as tx:
        empty = tx.table_counts()
    assert set(empty) >= TABLES
    assert all(empty[t] == 0 for t in TABLES)
    project = seed.project("demo")
    a = seed.item("a", scope="project", project_id=project)
    b = seed.item("b")
    seed.session("s1")
    with store.transaction(write=True) as tx:
        tx.ensure_principal("alice")
        tx.upsert_link(a.id, b.id, "relation", None, 1.0)
        tx.put_vector(a.id, "e1", b"\x00\x00\x80\x3f", 1)
        tx.append_event("alice", "remember", "ok", {})
        counts = tx.table_counts()
        assert tx.count_items(viewer("alice"), ItemQuery()) == 2
    assert {t: counts[t] for t in TABLES} == {
        "items": 2,
        "links": 1,
        "vectors": 1,
        "projects": 1,
        "project_members": 1,
        "sessions": 1,
        "principals": 1,
        "events": 1,
    }
