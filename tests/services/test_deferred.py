"""Deferred writes: the audit events of reads and the access counts, appended later, in order."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from memhub.audit.chain import verify_chain
from memhub.core.errors import ErrorKind, MemhubError
from memhub.core.models import Viewer
from memhub.services.deferred import DeferredWrites
from memhub.store.base import ItemQuery, NewItem
from memhub.store.open import open_store
from tests.store.backends import Backend


def test_events_and_touches_are_appended_in_order_by_a_write(tmp_path: Path, backend: Backend) -> None:
    store = open_store(backend.url(tmp_path, "d.db"))
    deferred = DeferredWrites(store, max_pending=3)
    with store.transaction(write=True) as tx:
        item = tx.insert_item(NewItem(kind="memory", owner="a", scope="user", body="x")).id
    assert not deferred.event("a", "get-topics", "ok", {}, "2026-01-01T00:00:00.000000Z")
    deferred.touch([item, item])
    assert deferred.pending_touches(item) == 2
    assert not deferred.event("a", "get-logs", "NOT_FOUND", {}, "2026-01-01T00:00:01.000000Z")
    assert deferred.event("a", "search", "ok", {}, "2026-01-01T00:00:02.000000Z")  # full: flush now
    batch = deferred.take()
    with store.transaction(write=True) as tx:
        deferred.write(tx, batch)
        tx.append_event("a", "add-log", "ok", {})
    events = list(store.iter_events())
    assert [(e.tool, e.outcome, e.at[:19]) for e in events][:3] == [
        ("get-topics", "ok", "2026-01-01T00:00:00"),
        ("get-logs", "NOT_FOUND", "2026-01-01T00:00:01"),
        ("search", "ok", "2026-01-01T00:00:02"),
    ]
    assert verify_chain(events).ok and len(deferred) == 0
    with store.transaction(write=False) as tx:
        assert tx.query_items(Viewer("a", "2026-01-01T00:00:00.000000Z"), ItemQuery())[0].access_count == 2
    store.close()


def test_a_failed_transaction_gives_its_batch_back(tmp_path: Path, backend: Backend) -> None:
    store = open_store(backend.url(tmp_path, "d.db"))
    deferred = DeferredWrites(store)
    deferred.event("a", "get-topics", "ok", {}, "2026-01-01T00:00:00.000000Z")
    deferred.event("a", "get-logs", "ok", {}, "2026-01-01T00:00:01.000000Z")
    batch = deferred.take()
    deferred.event("a", "later", "ok", {}, "2026-01-01T00:00:02.000000Z")
    with pytest.raises(MemhubError), store.transaction(write=True) as tx:
        deferred.write(tx, batch)
        raise MemhubError(ErrorKind.STORAGE, "disk full")
    deferred.requeue(batch)
    assert deferred.flush() == 3
    assert [e.tool for e in store.iter_events()] == ["get-topics", "get-logs", "later"]
    store.close()


@pytest.mark.anyio
async def test_the_flusher_appends_within_its_interval(tmp_path: Path, backend: Backend) -> None:
    store = open_store(backend.url(tmp_path, "d.db"))
    deferred = DeferredWrites(store)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(deferred.run_forever, 0.01)
        deferred.event("a", "get-topics", "ok", {}, "2026-01-01T00:00:00.000000Z")
        with anyio.fail_after(5):
            while len(deferred):
                await anyio.sleep(0.005)
        deferred.event("a", "at-shutdown", "ok", {}, "2026-01-01T00:00:01.000000Z")
        tasks.cancel_scope.cancel()  # a cancelled flusher flushes once more
    assert [e.tool for e in store.iter_events()] == ["get-topics", "at-shutdown"]
    store.close()
