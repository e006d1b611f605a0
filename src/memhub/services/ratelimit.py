"""Rate limits per principal and tool class: one mechanism for every toolset and transport.

Each (principal, class) pair has a token bucket: `limit` calls per `window_s` seconds, refilled
continuously. The call pipeline asks `RateLimiter.take` before running a tool; the HTTP layer
can ask the same limiter per client address. A limit of 0 means unlimited (the default: a
local stdio user has no one to be protected from).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

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


class RateLimiter:
    def __init__(self, limits: Mapping[str, Limit], clock: Callable[[], float]) -> None:
        self.limits = dict(limits)
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, key: str, tool_class: str) -> Verdict:
        """Spend one call of `key` in `tool_class` if its bucket allows it."""
        return self._check(key, tool_class, spend=True)

    def peek(self, key: str, tool_class: str) -> Verdict:
        """What `take` would answer, without spending (for headers, and for the HTTP layer to
        refuse a call the pipeline would refuse before anything is read)."""
        return self._check(key, tool_class, spend=False)

    def _check(self, key: str, tool_class: str, *, spend: bool) -> Verdict:
        limit = self.limits.get(tool_class)
        if limit is None or limit.calls <= 0:
            return UNLIMITED
        rate = limit.calls / limit.window_s  # tokens per second
        now = self.clock()
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
        retry = 0.0 if allowed else (1.0 - tokens) / rate
        return Verdict(
            allowed=allowed,
            limit=limit.calls,
            remaining=max(0, math.floor(tokens)),
            reset_s=(limit.calls - tokens) / rate,
            retry_after_s=retry,
        )

    def _forget_full(self, now: float) -> None:
        """Drop buckets that are full again (a forgotten bucket starts full: the same)."""
        with self._lock:
            for (key, tool_class), (tokens, at) in list(self._buckets.items()):
                limit = self.limits[tool_class]
                if tokens + (now - at) * limit.calls / limit.window_s >= limit.calls:
                    del self._buckets[(key, tool_class)]
