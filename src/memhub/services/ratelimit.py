"""Rate limits per principal and tool class: one mechanism for every toolset and transport.

Each (principal, class) pair has a token bucket: `limit` calls per `window_s` seconds, refilled
continuously. The call pipeline asks `RateLimiter.take` before running a tool; the HTTP layer
can ask the same limiter per client address. A limit of 0 means unlimited (the default: a
local stdio user has no one to be protected from).

Shared buckets: given a store that keeps buckets (`SharedBuckets`: PostgreSQL's
`rate_buckets` table, a SQLite store's `.limits` file beside it), every process serving that
store spends from the same buckets, one atomic upsert per limited call (store/sql/buckets.py),
so a limit of 40 a minute is 40 a minute across all replicas. Unlimited classes never touch
the store. When the store cannot answer, the call is counted in this process's own bucket
instead (a failing database must not turn every call away, nor let every call through).
Async callers use `take_async`/`peek_async`, which run a shared bucket's query off the
event loop.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import anyio

from memhub.core.errors import MemhubError

CLASSES = ("read", "write", "admin")


@dataclass(frozen=True, slots=True)
class Limit:
    calls: int  # per window; 0: unlimited
    window_s: float = 60.0


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    limit: int  # 0: unlimited
    remaining: int
    reset_s: float  # until the bucket is full again
    retry_after_s: float  # until the next call is allowed (0 when allowed)


UNLIMITED = Verdict(True, 0, 0, 0.0, 0.0)
MAX_BUCKETS = 100_000  # past this many keys, buckets that have refilled are forgotten
PURGE_EVERY_S = 60.0  # how often a process drops shared buckets that are full again
log = logging.getLogger(__name__)


@runtime_checkable
class SharedBuckets(Protocol):
    """Token buckets kept by the store, shared by every process that serves it."""

    def take_token(self, key: str, bucket: str, cap: float, rate: float, now: float) -> tuple[float, bool]:
        """Refill the bucket to `now`, spend one token if a whole one is there: (tokens left,
        spent). A bucket never seen starts with `cap` tokens."""
        ...

    def peek_tokens(self, key: str, bucket: str) -> tuple[float, float] | None:
        """(tokens, at) as last stored; None: no such bucket (it is full)."""
        ...

    def purge_buckets(self, before: float) -> int:
        """Drop buckets last spent before `before` (full again by then)."""
        ...


class RateLimiter:
    def __init__(
        self,
        limits: Mapping[str, Limit],
        clock: Callable[[], float],
        *,
        shared: SharedBuckets | None = None,
        namespace: str = "principal",
    ) -> None:
        """`shared`: the store's buckets (None: this process's own); `namespace` keeps two
        limiters of one store apart there (per principal, per IP)."""
        self.limits = dict(limits)
        self.clock = clock
        self.shared = shared
        self.namespace = namespace
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}  # key -> (tokens, at)
        self._purged = time.monotonic()
        self._failing = False  # the shared buckets failed last time (logged once per outage)

    def take(self, key: str, tool_class: str) -> Verdict:
        """Spend one call of `key` in `tool_class` if its bucket allows it (blocking)."""
        return self._check(key, tool_class, spend=True)

    def peek(self, key: str, tool_class: str) -> Verdict:
        """What `take` would answer, without spending (for headers, and for the HTTP layer to
        refuse a call the pipeline would refuse before anything is read)."""
        return self._check(key, tool_class, spend=False)

    def limited(self, tool_class: str) -> bool:
        limit = self.limits.get(tool_class)
        return limit is not None and limit.calls > 0

    async def take_async(self, key: str, tool_class: str) -> Verdict:
        """`take` from the event loop: a shared bucket's query runs in a worker thread."""
        if self.shared is None or not self.limited(tool_class):
            return self.take(key, tool_class)
        return await anyio.to_thread.run_sync(self.take, key, tool_class)

    async def peek_async(self, key: str, tool_class: str) -> Verdict:
        if self.shared is None or not self.limited(tool_class):
            return self.peek(key, tool_class)
        return await anyio.to_thread.run_sync(self.peek, key, tool_class)

    def _check(self, key: str, tool_class: str, *, spend: bool) -> Verdict:
        limit = self.limits.get(tool_class)
        if limit is None or limit.calls <= 0:
            return UNLIMITED
        rate = limit.calls / limit.window_s  # tokens per second
        now = self.clock()
        if self.shared is not None:
            try:
                tokens, allowed = self._shared(self.shared, key, tool_class, limit, now, spend=spend)
            except MemhubError as exc:
                if not self._failing:
                    log.warning("shared rate limits unavailable, counting in this process: %s", exc.message)
                self._failing = True
            else:
                self._failing = False
                return _verdict(limit, tokens, allowed)
        with self._lock:
            tokens, at = self._buckets.get((key, tool_class), (float(limit.calls), now))
            tokens = min(float(limit.calls), tokens + max(0.0, now - at) * rate)
            allowed = tokens >= 1.0
            if allowed and spend:
                tokens -= 1.0
            if spend:
                self._buckets[(key, tool_class)] = (tokens, now)
        if len(self._buckets) > MAX_BUCKETS:
            self._forget_full(now)
        return _verdict(limit, tokens, allowed)

    def _shared(
        self, shared: SharedBuckets, key: str, tool_class: str, limit: Limit, now: float, *, spend: bool
    ) -> tuple[float, bool]:
        name, rate = f"{self.namespace}:{key}", limit.calls / limit.window_s
        if not spend:
            row = shared.peek_tokens(name, tool_class)
            if row is None:
                return float(limit.calls), True
            tokens = min(float(limit.calls), row[0] + max(0.0, now - row[1]) * rate)
            return tokens, tokens >= 1.0
        tokens, allowed = shared.take_token(name, tool_class, float(limit.calls), rate, now)
        if time.monotonic() - self._purged >= PURGE_EVERY_S:
            self._purged = time.monotonic()
            window = max(lim.window_s for lim in self.limits.values())
            shared.purge_buckets(now - window)
        return tokens, allowed

    def _forget_full(self, now: float) -> None:
        """Drop buckets that are full again (a forgotten bucket starts full: the same)."""
        with self._lock:
            for (key, tool_class), (tokens, at) in list(self._buckets.items()):
                limit = self.limits[tool_class]
                if tokens + (now - at) * limit.calls / limit.window_s >= limit.calls:
                    del self._buckets[(key, tool_class)]


def _verdict(limit: Limit, tokens: float, allowed: bool) -> Verdict:
    rate = limit.calls / limit.window_s
    return Verdict(
        allowed=allowed,
        limit=limit.calls,
        remaining=max(0, math.floor(tokens)),
        reset_s=max(0.0, limit.calls - tokens) / rate,
        retry_after_s=0.0 if allowed else max(0.0, 1.0 - tokens) / rate,
    )
