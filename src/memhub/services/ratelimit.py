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


class RateLimiter:
    def __init__(self, limits: Mapping[str, Limit], clock: Callable[[], float]) -> None:
        self.limits = dict(limits)
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}  # key -> (tokens, at)

    def take(self, key: str, tool_class: str) -> Verdict:
        """Spend one call of `key` in `tool_class` if its bucket allows it."""
        limit = self.limits.get(tool_class)
        if limit is None or limit.calls <= 0:
            return UNLIMITED
        rate = limit.calls / limit.window_s  # tokens per second
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.get((key, tool_class), (float(limit.calls), now))
            tokens = min(float(limit.calls), tokens + max(0.0, now - at) * rate)
            allowed = tokens >= 1.0
            if allowed:
                tokens -= 1.0
            self._buckets[(key, tool_class)] = (tokens, now)
        retry = 0.0 if allowed else (1.0 - tokens) / rate
        return Verdict(
            allowed=allowed,
            limit=limit.calls,
            remaining=max(0, math.floor(tokens)),
            reset_s=(limit.calls - tokens) / rate,
            retry_after_s=retry,
        )
