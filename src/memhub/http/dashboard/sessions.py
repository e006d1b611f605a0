"""Dashboard sessions: a random id in a signed cookie, the state kept in this process.

The cookie holds `sid.signature` (HMAC-SHA256 under a per-process secret) and nothing else:
no principal, no credential. A session knows who logged in, how (an API key: its SHA-256,
checked again on every request so a revoked key ends the session at once; a JWT: its
expiry), and its CSRF token. Sessions end after `IDLE_S` without a request, after `MAX_S` in
all, at logout, and when the process restarts (the secret is new).

A session before login (the login form's) keeps nothing in this process: its id carries the
time it was issued and its CSRF token is derived from the id with the secret. So no number of
anonymous visits can push another visitor's login form, or anyone's session, out of the table.
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
ANONYMOUS = "a"  # the first letter of an anonymous session's id ("u": a logged-in one)


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

    def _anonymous(self, sid: str, issued: float) -> Session:
        csrf = hmac.new(self._secret, b"csrf:" + sid.encode(), hashlib.sha256).hexdigest()
        now = time.monotonic()
        return Session(sid, csrf=csrf, ends_at=now + self.idle_s - (time.time() - issued), seen_at=now)

    def load(self, cookie: str | None) -> Session | None:
        """The live session a cookie names (None: absent, forged, idle too long or ended)."""
        sid, _, signature = (cookie or "").partition(".")
        if not sid or not hmac.compare_digest(signature.encode(), self._sign(sid).encode()):
            return None
        if sid.startswith(ANONYMOUS):  # signed by us: `a<issued>-<random>`
            issued = float(sid[len(ANONYMOUS) :].partition("-")[0])
            return self._anonymous(sid, issued) if 0 <= time.time() - issued <= self.idle_s else None
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
        """A new session (a login always starts a new one: the id before login is dropped).
        Without a principal: an anonymous session, kept by the cookie alone."""
        if principal is None:
            issued = int(time.time())
            return self._anonymous(f"{ANONYMOUS}{issued}-{secrets.token_urlsafe(16)}", issued)
        now = time.monotonic()
        ends = now + self.max_s if until is None else min(now + self.max_s, until)
        session = Session(
            "u" + secrets.token_urlsafe(32), principal=principal, key_hash=key_hash, ends_at=ends, seen_at=now
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
        if len(self._by_id) >= MAX_SESSIONS:  # still full: the idlest go
            ranked = sorted(self._by_id.values(), key=lambda s: s.seen_at)
            for session in ranked[: len(self._by_id) - MAX_SESSIONS // 2]:
                del self._by_id[session.sid]
