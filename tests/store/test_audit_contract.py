"""AuditTx: one linear hash chain, even with several writers on the same store."""

from __future__ import annotations

import threading

import pytest

from memhub.audit.chain import verify_chain
from memhub.core.hashing import GENESIS_HASH
from memhub.store.base import Store
from tests.store.contract import OpenStore


def test_append_event_chains(store: Store) -> None:
    assert list(store.iter_events()) == []
    with store.transaction(write=True) as tx:
        first = tx.append_event("alice", "remember", "ok", {"ids": [1], "note": "日本語"})
        second = tx.append_event("alice", "recall", "ok", {})
        now = tx.now
    with store.transaction(write=True) as tx:
        third = tx.append_event("bob", "forget", "not_found", {"id": 7}, at="2029-12-31T23:59:59.000000Z")
    assert first.prev_hash == GENESIS_HASH
    assert second.prev_hash == first.hash and third.prev_hash == second.hash
    assert (first.at, second.at) == (now, now)  # default: the transaction's time
    assert third.at == "2029-12-31T23:59:59.000000Z"  # `at` honoured
    events = list(store.iter_events())
    assert events == [first, second, third]
    assert events[0].detail == {"ids": [1], "note": "日本語"}
    assert (events[2].principal, events[2].tool, events[2].outcome) == ("bob", "forget", "not_found")
    assert [e.id for e in events] == sorted(e.id for e in events)
    report = verify_chain(events)
    assert report.ok, report.problems
    assert report.events == 3


def test_rolled_back_transaction_leaves_no_event(store: Store) -> None:
    with store.transaction(write=True) as tx:
        kept = tx.append_event("alice", "remember", "ok", {})
    with pytest.raises(RuntimeError), store.transaction(write=True) as tx:
        tx.append_event("alice", "remember", "ok", {"lost": True})
        raise RuntimeError("the call failed")
    assert list(store.iter_events()) == [kept]
    with store.transaction(write=True) as tx:
        after = tx.append_event("alice", "recall", "ok", {})
    assert after.prev_hash == kept.hash  # the chain continues from the committed head
    assert verify_chain(store.iter_events()).ok


def test_linear_chain_with_concurrent_writers(store: Store, open_more: OpenStore) -> None:
    """Two Store objects on one database (two processes), two threads each, appending at once."""
    stores = [store, open_more()]
    per_thread = 50
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def write(which: int, thread: int) -> None:
        try:
            start.wait()
            for n in range(per_thread):
                with stores[which].transaction(write=True) as tx:
                    tx.append_event(f"writer-{which}", "remember", "ok", {"thread": thread, "n": n})
        except BaseException as exc:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w, t)) for w in range(2) for t in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    for reader in stores:
        events = list(reader.iter_events())
        report = verify_chain(events)
        assert report.ok, report.problems[:5]
        assert report.events == 4 * per_thread
        seen = {(e.principal, e.detail["thread"], e.detail["n"]) for e in events}
        assert seen == {(f"writer-{w}", t, n) for w in range(2) for t in range(2) for n in range(per_thread)}
        assert len({e.prev_hash for e in events}) == len(events)  # no head was extended twice


def test_events_page_is_keyset_paged_and_bounded(store: Store) -> None:
    """Pages newest first by id, filters in the query, and one page reads at most `scan`
    events: a rare filter answers a short page with the id to continue from."""
    with store.transaction(write=True) as tx:
        for n in range(130):
            detail = {"memory_id": f"mem_{n}"} if n % 10 == 0 else {"returned": ["mem_1", f"clm_{n}"]}
            tx.append_event(
                "alice" if n % 3 else "bob", "memory" if n % 2 else "dashboard.item", "ok", detail
            )
    with store.transaction(write=False) as tx:
        first, after = tx.events_page(before=None, limit=50, scan=5_000)
        second, after2 = tx.events_page(before=after, limit=50, scan=5_000)
        third, end = tx.events_page(before=after2, limit=50, scan=5_000)
        assert [e.id for e in first + second + third] == list(range(130, 0, -1))
        assert after == 81 and after2 == 31 and end is None and len(third) == 30
        bobs, _ = tx.events_page(before=None, limit=500, scan=5_000, principal="bob", tool_prefix="dash")
        assert {(e.principal, e.tool) for e in bobs} == {("bob", "dashboard.item")} and len(bobs) == 22
        mem1, _ = tx.events_page(before=None, limit=500, scan=5_000, mentions="mem_1")
        assert [e.id for e in mem1] == [n + 1 for n in range(129, -1, -1) if n % 10]  # not mem_10, mem_100
        near, cont = tx.events_page(before=None, limit=50, scan=20, mentions="mem_100")
        assert near == [] and cont == 111  # only the newest 20 were read; continue below them
        found, _ = tx.events_page(before=cont, limit=50, scan=20, mentions="mem_100")
        assert [e.detail for e in found] == [{"memory_id": "mem_100"}]
