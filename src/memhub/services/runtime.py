"""What a tool call runs against: the store and engines (Runtime) and the call itself (Call).

A tool touches the database in one of two ways. `Call.transact` runs a service function and
the call's audit event in one write transaction, so a call either happens and is recorded,
or fails and changes nothing (its failure is then recorded on its own). `Call.read` runs in
a read transaction that never waits for writers; its audit event (and any access counts)
are deferred writes (services/deferred.py), appended within a fraction of a second.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from memhub.core.clock import Clock, SystemClock, isoformat
from memhub.core.errors import ErrorKind, MemhubError
from memhub.core.models import Principal
from memhub.services.deferred import DeferredWrites
from memhub.store.base import Store, Tx

if TYPE_CHECKING:
    from memhub.search.backfill import Readiness
    from memhub.search.embedding import EmbeddingService
    from memhub.search.engine import SearchEngine, VectorBackfill

T = TypeVar("T")
S = TypeVar("S")
SETTLE_SECONDS = 1.5  # a read needing vectors waits at most this long (the pending ones: 0.5 s of it)
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class Runtime:
    """The shared objects of one server process, wired by a composition root. What only one
    toolset needs (its settings, the vault's caches) is not here: it is that toolset's state
    (`Toolset.state`), handed to its calls as `Call.state`."""

    store: Store
    clock: Clock = field(default_factory=SystemClock)
    search: SearchEngine | None = None
    embedding: EmbeddingService | None = None
    backfill: VectorBackfill | None = None
    home: Path | None = None  # where backups go by default
    limiter: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(4))
    deferred: DeferredWrites = field(init=False)

    def __post_init__(self) -> None:
        self.deferred = DeferredWrites(self.store)

    async def in_thread(self, fn: Callable[[], T]) -> T:
        """Run blocking work (SQLite, numpy) off the event loop."""
        return await anyio.to_thread.run_sync(fn, limiter=self.limiter)

    def now(self) -> str:
        return isoformat(self.clock.now())

    def close(self) -> None:
        """Write what is still deferred, then close the store."""
        self.deferred.flush()
        self.store.close()


def readiness_note(ready: Readiness, pending: str, *, search: bool) -> str | None:
    """The note of a read that ran with `ready` (None: nothing missing)."""
    if ready.model != "ready":
        effect = (
            "these results come from keyword search alone"
            if search
            else "memories stored meanwhile are not compared by meaning yet"
        )
        if ready.model == "loading":
            return f"the embedding model is still loading: {effect}; ask again in a moment"
        return f"the embedding model could not be loaded: {effect}"
    waiting = f"{ready.pending} item(s) still without vectors" if ready.pending else ""
    if not ready.caught_up:
        return f"{pending} ({waiting})" if waiting else pending
    if waiting:
        return f"{waiting} (being indexed): results by meaning may miss them; ask again in a moment"
    return None


def new_request_id() -> str:
    return uuid.uuid4().hex


@dataclass
class Call:
    """One tool invocation by one principal."""

    runtime: Runtime
    principal: Principal
    tool: str
    detail: dict[str, Any] = field(default_factory=dict)
    audited: bool = False
    progress: Progress | None = None
    read_only: bool = False  # the tool's declaration: its handler reads (`transactional` follows it)
    request_id: str = field(default_factory=new_request_id)
    trace_id: str = ""
    deadline: float | None = None  # time.monotonic() after which nothing may be committed
    at: str = ""  # when the call began (its audit event's time)
    state: object = None  # its toolset's state (`Toolset.state`: a small config, the vault's caches)

    def __post_init__(self) -> None:
        self.trace_id = self.trace_id or self.request_id
        self.at = self.at or self.runtime.now()

    def state_of(self, kind: type[S]) -> S:
        """The call's toolset state, typed: `call.state_of(PceConfig)`."""
        if not isinstance(self.state, kind):
            raise MemhubError(ErrorKind.UNAVAILABLE, f"{self.tool} is not configured in this process")
        return self.state

    async def catch_up(
        self, pending: str, *, search: bool = True, timeout: float = SETTLE_SECONDS
    ) -> str | None:
        """Read your writes before a read that needs vectors: wait (at most `timeout` in all)
        for a model still loading and (`PENDING_WAIT_S` at most) for the vectors and semantic
        links of items this process wrote, when they can be made in that time
        (search/backfill.py, `readiness`).
        None when the read sees everything; else the note the result carries, saying what it
        may miss: `pending` (this process's writes are not embedded yet), keyword search alone
        (`search`) or no associations by meaning (the model is loading or failed), or a backlog."""
        if self.runtime.backfill is None:
            return None
        return readiness_note(await self.runtime.backfill.readiness(timeout), pending, search=search)

    async def report(self, done: float, total: float | None, message: str | None = None) -> None:
        """Progress of long work (reindex, import), as MCP progress notifications when asked for."""
        if self.progress is not None:
            await self.progress(done, total, message)

    def report_from_thread(self, done: float, total: float | None, message: str | None = None) -> None:
        """`report` from inside `transact`'s worker thread (long imports)."""
        if self.progress is not None:
            anyio.from_thread.run(self.report, done, total, message)

    def check_deadline(self) -> None:
        """TIMEOUT if the call is past its limit (before work that cannot be rolled back)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise MemhubError(
                ErrorKind.TIMEOUT, f"{self.tool} took longer than its limit; nothing was changed"
            )

    async def transact(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` in one write transaction together with this call's audit event (and the
        deferred events of earlier reads, appended first)."""

        deferred = self.runtime.deferred

        def work() -> T:
            batch = None
            try:
                with self.runtime.store.transaction(write=True) as tx:
                    result = fn(tx)
                    self.check_deadline()  # past the limit: roll back rather than commit late
                    batch = deferred.take()
                    deferred.write(tx, batch)
                    tx.append_event(self.principal.id, self.tool, "ok", self.detail, at=self.at)
            except BaseException:
                if batch is not None:
                    deferred.requeue(batch)
                raise
            return result

        result = await self.runtime.in_thread(work)
        self.audited = True
        if self.runtime.backfill is not None:
            self.runtime.backfill.notify()  # new or changed text: give it a vector soon
        return result

    async def read(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` in a read transaction (it must not write). The call is audited once it
        has ended, with its outcome, as a deferred write (`record`)."""

        def work() -> T:
            with self.runtime.store.transaction(write=False) as tx:
                return fn(tx)

        result = await self.runtime.in_thread(work)
        self.check_deadline()
        return result

    async def run(self, fn: Callable[[Tx], T]) -> T:
        """`read` for a read-only tool, `transact` for the others."""
        return await (self.read(fn) if self.read_only else self.transact(fn))

    async def record(self, outcome: str) -> None:
        """Audit a call that did not write through `transact` (reads, failures), deferred."""
        if self.runtime.deferred.event(self.principal.id, self.tool, outcome, self.detail, self.at):
            await self.runtime.in_thread(self.runtime.deferred.flush)
        self.audited = True
