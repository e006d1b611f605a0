"""Writes that a read must not wait for: the audit events of calls that changed nothing (reads,
failures) and the access counts of reads.

A read runs in a read transaction and never takes the store's writer lock: on a shared file
a `get-topics` would otherwise queue behind every writer. What it has to record is kept
here and appended later, in order, by whichever comes first: the next write transaction of
this process (which appends them before its own event), a periodic flush (the server's
lifespan runs one every `FLUSH_SECONDS`), a full queue, or shutdown. An event keeps the time
its call happened (`at`); its place in the hash chain is the time it was appended. A process
killed with SIGKILL loses at most the last flush interval of read events.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

import anyio

from memhub.core.errors import MemhubError
from memhub.store.base import Store, Tx

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.5
MAX_PENDING = 512  # queued events past which the call that adds one flushes the queue


@dataclass(frozen=True, slots=True)
class PendingEvent:
    principal: str
    tool: str
    outcome: str
    detail: dict[str, Any]
    at: str


@dataclass(frozen=True, slots=True)
class Batch:
    events: list[PendingEvent]
    touches: Counter[int]


class DeferredWrites:
    def __init__(self, store: Store, *, max_pending: int = MAX_PENDING) -> None:
        self.store = store
        self.max_pending = max_pending
        self._lock = threading.Lock()  # calls add from worker threads and the event loop
        self._events: list[PendingEvent] = []
        self._touches: Counter[int] = Counter()
        self.flushed = 0  # events appended by flushes (a metric)

    def __len__(self) -> int:
        with self._lock:
            return len(self._events) + len(self._touches)

    def event(self, principal: str, tool: str, outcome: str, detail: dict[str, Any], at: str) -> bool:
        """Queue an audit event; True when the queue is full and should be flushed now (by
        the caller, off the event loop and outside any transaction of this store)."""
        with self._lock:
            self._events.append(PendingEvent(principal, tool, outcome, dict(detail), at))
            return len(self._events) >= self.max_pending

    def touch(self, item_ids: list[int]) -> None:
        """Count one access of each item (shown at once by `pending_touches`, stored later).
        Safe inside a transaction: it never writes."""
        with self._lock:
            self._touches.update(item_ids)

    def pending_touches(self, item_id: int) -> int:
        with self._lock:
            return self._touches.get(item_id, 0)

    def take(self) -> Batch:
        """Everything pending, removed from the queue: write it with `write`, or give it back
        with `requeue` when the transaction that was to hold it fails."""
        with self._lock:
            batch = Batch(self._events, self._touches)
            self._events, self._touches = [], Counter()
        return batch

    def requeue(self, batch: Batch) -> None:
        with self._lock:  # in front of anything added meanwhile
            self._events[:0] = batch.events
            self._touches.update(batch.touches)

    @staticmethod
    def write(tx: Tx, batch: Batch) -> None:
        for e in batch.events:
            tx.append_event(e.principal, e.tool, e.outcome, e.detail, at=e.at)
        if batch.touches:
            tx.touch_access(dict(batch.touches))

    def flush(self) -> int:
        """Append everything pending in one write transaction of its own (blocking). The batch
        is taken once the writer lock is held, so a write that commits meanwhile cannot put
        newer events before it."""
        if not len(self):
            return 0
        batch: Batch | None = None
        try:
            with self.store.transaction(write=True) as tx:
                batch = self.take()
                self.write(tx, batch)
        except BaseException as exc:
            if batch is not None:
                self.requeue(batch)
            if isinstance(exc, MemhubError):
                log.warning("deferred audit events not written yet: %s", exc.message)
                return 0
            raise
        self.flushed += len(batch.events)
        return len(batch.events)

    async def run_forever(self, interval: float = FLUSH_SECONDS) -> None:
        """Flush every `interval` seconds until cancelled (then once more)."""
        try:
            while True:
                await anyio.sleep(interval)
                if len(self):
                    await anyio.to_thread.run_sync(self.flush)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.flush)
