"""Open MCP sessions over HTTP, bounded in total and per principal (http/guard.py keeps the table).

A session is a streamable-HTTP session (opened by a POST to /mcp without `Mcp-Session-Id`,
named by the `Mcp-Session-Id` of its answer) or an SSE stream (GET /sse, for as long as it
is open). Each belongs to the principal that opened it; the SDK refuses its id to anyone
else (the guard hands it the principal as the request's `user`).

When a new session would pass `max_per_principal` (the opener's sessions) or `max_total`,
the least recently used idle session (no request in flight: an SSE stream or a streamable
GET stream is never idle) of that principal, or of anyone for the total, is closed first;
when none is idle the new session is refused. Sessions the SDK ended on its own (idle
timeout) are found out when their id answers 404, or forgotten once idle for longer than
the SDK keeps them.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

Close = Callable[[], Awaitable[None]]


@dataclass
class Session:
    owner: str
    busy: int = 1  # requests in flight (an opening request or a stream counts)
    last_used: float = 0.0
    close: Close | None = None  # how to end it from here (None: it ends with its stream)


@dataclass
class SessionTable:
    max_total: int  # 0: no limit
    max_per_principal: int  # 0: no limit
    forget_after_s: float = 30 * 60.0  # the SDK ends a session idle this long
    clock: Callable[[], float] = time.monotonic
    sessions: dict[str, Session] = field(default_factory=dict)
    _keys: itertools.count[int] = field(default_factory=itertools.count)

    def __len__(self) -> int:
        return len(self.sessions)

    def owned(self, owner: str) -> int:
        return sum(1 for s in self.sessions.values() if s.owner == owner)

    def admit(self, owner: str) -> tuple[str | None, list[Session]]:
        """A slot for a new session of `owner`: (its provisional key, the idle sessions to close
        first, already forgotten here), or (None, []) when every session in the way is busy."""
        now = self.clock()
        for key, session in list(self.sessions.items()):  # ended by the SDK's idle timeout
            if not session.busy and now - session.last_used > self.forget_after_s:
                del self.sessions[key]
        chosen: list[str] = []
        for bound, whose in ((self.max_per_principal, owner), (self.max_total, None)):
            if not bound:
                continue
            mine = [
                k for k, s in self.sessions.items() if (whose is None or s.owner == whose) and k not in chosen
            ]
            excess = len(mine) - bound + 1
            if excess <= 0:
                continue
            idle = sorted(
                (k for k in mine if not self.sessions[k].busy and self.sessions[k].close is not None),
                key=lambda k: self.sessions[k].last_used,
            )
            if len(idle) < excess:
                return None, []
            chosen += idle[:excess]
        victims = [self.sessions.pop(k) for k in chosen]
        key = f"opening-{next(self._keys)}"
        self.sessions[key] = Session(owner, busy=1, last_used=now)
        return key, victims

    def opened(self, key: str, session_id: str | None, close: Close | None) -> None:
        """The opening request of `key` is answered: the session is `session_id` (None: not opened)."""
        session = self.sessions.pop(key, None)
        if session is None or session_id is None:
            return
        session.busy -= 1
        session.last_used = self.clock()
        session.close = close
        self.sessions[session_id] = session

    def begin(self, session_id: str, owner: str) -> bool:
        """A request of `owner` for `session_id` starts; False when the session is not `owner`'s
        (the SDK refuses it: nothing here changes)."""
        session = self.sessions.get(session_id)
        if session is None or session.owner != owner:
            return False
        session.busy += 1
        return True

    def end(self, session_id: str, *, gone: bool = False) -> None:
        """A request that `begin` counted is answered; `gone`: the session no longer exists."""
        session = self.sessions.get(session_id)
        if session is None:
            return
        session.busy = max(0, session.busy - 1)
        session.last_used = self.clock()
        if gone:
            del self.sessions[session_id]

    def drop(self, key: str) -> None:
        self.sessions.pop(key, None)
