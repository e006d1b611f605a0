"""Dashboard sessions: a random id in a signed cookie, the state kept in this process.

The cookie holds `sid.signature` (HMAC-SHA256 under a per-process secret) and nothing else:
no principal, no credential. A session knows who logged in, how (an API key: its SHA-256,
checked again on every request so a revoked key ends the session at once; a JWT: its
expiry), and its CSRF token. Sessions end after `IDLE_S` without a request, after `MAX_S` in
all, at logout, and when the process restarts (the secret is new).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

COOKIE = "memhub_session"
IDLE_S = 30 * 60.0
MAX_S = 8 * 3600.0
MAX_SESSIONS = 10_000


@dataclass
class Session:
    sid: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    principal: str | None = None  # None: not logged in (the login form's CSRF still works)
    key_hash: str | None = None  # an API-key login: the key's SHA-256, re-checked per request
    ends_at: float = 0.0  # monotonic time: MAX_S, or a JWT's expiry if sooner
    seen_at: float = 0.0

    def check_csrf(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf.encode(), (token or "").encode())


class Sessions:
    def __init__(self, secret: bytes | None = None, idle_s: float = IDLE_S, max_s: float = MAX_S) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self.idle_s, self.max_s = idle_s, max_s
        self._lock = threading.Lock()
        self._by_id: dict[str, Session] = {}

    def _sign(self, sid: str) -> str:
        return hmac.new(self._secret, sid.encode(), hashlib.sha256).hexdigest()[:32]

    def cookie(self, session: Session) -> str:
        return f"{session.sid}.{self._sign(session.sid)}"

    def load(self, cookie: str | None) -> Session | None:
        """The live session a cookie names (None: absent, forged, idle too long or ended)."""
        sid, _, signature = (cookie or "").partition(".")
        if not sid or not hmac.compare_digest(signature.encode(), self._sign(sid).encode()):
            return None
        now = time.monotonic()
        with self._lock:
            session = self._by_id.get(sid)
            if session is None:
                return None
            if now > session.ends_at or now - session.seen_at > self.idle_s:
                del self._by_id[sid]
                return None
            session.seen_at = now
            return session

    def start(
        self, principal: str | None = None, key_hash: str | None = None, until: float | None = None
    ) -> Session:
        """A new session (a login always starts a new one: the id before login is dropped)."""
        now = time.monotonic()
        ends = now + self.max_s if until is None else min(now + self.max_s, until)
        session = Session(
            secrets.token_urlsafe(32), principal=principal, key_hash=key_hash, ends_at=ends, seen_at=now
        )
        with self._lock:
            if len(self._by_id) >= MAX_SESSIONS:
                self._prune(now)
            self._by_id[session.sid] = session
        return session

    def end(self, session: Session) -> None:
        with self._lock:
            self._by_id.pop(session.sid, None)

    def _prune(self, now: float) -> None:
        for sid, s in list(self._by_id.items()):
            if now > s.ends_at or now - s.seen_at > self.idle_s:
                del self._by_id[sid]
        if len(self._by_id) >= MAX_SESSIONS:  # still full: anonymous ones go first, then the idlest
            ranked = sorted(self._by_id.values(), key=lambda s: (s.principal is not None, s.seen_at))
            for session in ranked[: len(self._by_id) - MAX_SESSIONS // 2]:
                del self._by_id[session.sid]
