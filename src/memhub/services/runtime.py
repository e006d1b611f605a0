"""What a tool call runs against: the store and engines (Runtime) and the call itself (Call).

`Call.transact` is the one way a tool touches the database: the service function and the
call's audit event share one write transaction, so a call either happens and is recorded,
or fails and changes nothing (its failure is then recorded on its own).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from memhub.core.clock import Clock, SystemClock
from memhub.core.models import Principal
from memhub.store.base import Store, Tx

if TYPE_CHECKING:
    from memhub.search.embedding import EmbeddingService
    from memhub.search.engine import SearchEngine, VectorBackfill
    from memhub.services.vault.state import VaultState

T = TypeVar("T")
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class Runtime:
    """The shared objects of one server process, wired by a composition root."""

    store: Store
    clock: Clock = field(default_factory=SystemClock)
    search: SearchEngine | None = None
    embedding: EmbeddingService | None = None
    backfill: VectorBackfill | None = None
    home: Path | None = None  # where backups go by default
    vault: Path | None = None  # the vault root (seed 001)
    vault_state: VaultState | None = None  # its caches and store index, built with `vault`
    limiter: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(4))

    async def in_thread(self, fn: Callable[[], T]) -> T:
        """Run blocking work (SQLite, numpy) off the event loop."""
        return await anyio.to_thread.run_sync(fn, limiter=self.limiter)


@dataclass
class Call:
    """One tool invocation by one principal."""

    runtime: Runtime
    principal: Principal
    tool: str
    detail: dict[str, Any] = field(default_factory=dict)
    audited: bool = False
    progress: Progress | None = None

    async def report(self, done: float, total: float | None, message: str | None = None) -> None:
        """Progress of long work (reindex, import), as MCP progress notifications when asked for."""
        if self.progress is not None:
            await self.progress(done, total, message)

    def report_from_thread(self, done: float, total: float | None, message: str | None = None) -> None:
        """`report` from inside `transact`'s worker thread (long imports)."""
        if self.progress is not None:
            anyio.from_thread.run(self.report, done, total, message)

    async def transact(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` in one write transaction together with this call's audit event."""

        def work() -> T:
            with self.runtime.store.transaction(write=True) as tx:
                result = fn(tx)
                tx.append_event(self.principal.id, self.tool, "ok", self.detail)
            return result

        result = await self.runtime.in_thread(work)
        self.audited = True
        if self.runtime.backfill is not None:
            self.runtime.backfill.notify()  # new or changed text: give it a vector soon
        return result

    async def record(self, outcome: str) -> None:
        """Audit a call that did not (or could not) go through `transact`."""

        def work() -> None:
            with self.runtime.store.transaction(write=True) as tx:
                tx.append_event(self.principal.id, self.tool, outcome, self.detail)

        await self.runtime.in_thread(work)
        self.audited = True
