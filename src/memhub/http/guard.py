"""The HTTP front door: every request to /mcp, /sse and /messages/ passes here first.

In order: Host allowed (421), Origin allowed (403), a CORS preflight answered (204), the
caller authenticated (401 with `WWW-Authenticate`, audited; nothing executed), the body
bounded (413), rate limits per client IP and per principal by tool class (429 with
`Retry-After`). Answers carry `X-RateLimit-Limit/Remaining/Reset` whenever a limit applies,
and CORS headers for an allowed Origin. `/health` and `/ready` stay open.

The limits are the call pipeline's own `RateLimiter` (services/ratelimit.py): per client IP
here, per principal in the pipeline; this layer only peeks at the principal's bucket, so a
call is never counted twice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memhub.auth.identity import STATE_KEY
from memhub.core.models import GlobalRole, Principal
from memhub.http.sessions import SessionTable
from memhub.services.ratelimit import RateLimiter, Verdict

Authenticate = Callable[[Mapping[str, str]], tuple[Principal | None, str]]  # blocking
Audit = Callable[[str, dict[str, Any]], None]  # (outcome, detail) of a refused request
OPEN_PATHS = ("/health", "/ready")
ADMIN_PATHS = ("/metrics",)  # store-wide counts: the admin role only
STREAMABLE_PATH, SSE_PATH = "/mcp", "/sse"
INVALID_REQUEST = -32600
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
EXPOSED = (
    "Mcp-Session-Id, Mcp-Protocol-Version, Retry-After, "
    "X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset"
)


def default_hosts(bind: str) -> tuple[str, ...]:
    """The Host names accepted when none are configured: loopback and the bound address."""
    names = list(LOOPBACK_NAMES)
    if bind not in WILDCARD_BINDS and bind not in ("127.0.0.1", "localhost", "::1"):
        names.append(f"[{bind}]" if ":" in bind else bind)
    return tuple(f"{name}:*" for name in names)


def default_origins(hosts: Sequence[str]) -> tuple[str, ...]:
    names = dict.fromkeys(h.removesuffix(":*") for h in hosts)
    return tuple(f"{scheme}://{name}:*" for name in names for scheme in ("http", "https"))


def _matches(value: str, patterns: Sequence[str]) -> bool:
    """Exact, `*` (anything), or `base:*` (base with any port, or without one)."""
    for pattern in patterns:
        if pattern == "*" or value == pattern:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-2]
            if value == base or (value.startswith(base + ":") and value[len(base) + 1 :].isdigit()):
                return True
    return False


@dataclass
class GuardPolicy:
    allowed_hosts: Sequence[str]
    allowed_origins: Sequence[str]
    allowed_methods: Sequence[str]
    max_body: int
    authenticate: Authenticate | None = None  # None: no authentication (loopback only)
    audit: Audit | None = None
    ip_limiter: RateLimiter | None = None
    principal_limiter: RateLimiter | None = None
    tool_classes: Mapping[str, str] = field(default_factory=dict)  # tool name -> read/write/admin
    local: Principal | None = None  # who an unauthenticated caller is (`auth none`)
    sessions: SessionTable | None = None  # open MCP sessions, bounded (None: unbounded)


def _response(status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]]) -> list[Message]:
    data = json.dumps(body).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers]
    return [
        {"type": "http.response.start", "status": status, "headers": start},
        {"type": "http.response.body", "body": data},
    ]


def _error(
    status: int, code: str, message: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> list[Message]:
    return _response(status, {"error": {"code": code, "message": message}}, headers)


def _rate_headers(verdict: Verdict | None) -> list[tuple[bytes, bytes]]:
    if verdict is None or verdict.limit <= 0:
        return []
    headers = [
        (b"x-ratelimit-limit", str(verdict.limit).encode()),
        (b"x-ratelimit-remaining", str(verdict.remaining).encode()),
        (b"x-ratelimit-reset", str(math.ceil(verdict.reset_s)).encode()),
    ]
    if not verdict.allowed:
        headers.append((b"retry-after", str(max(1, math.ceil(verdict.retry_after_s))).encode()))
    return headers


def _messages(body: bytes) -> list[Any]:
    """The JSON-RPC messages of a body (one message or a batch); [] when it is not JSON."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return []
    return data if isinstance(data, list) else [data]


def _classes(messages: Sequence[Any], tool_classes: Mapping[str, str]) -> list[tuple[str, bool]]:
    """(rate-limit class, spent by the call pipeline) of every method a body calls: a tool call
    is its tool's class, spent by the pipeline; any other method (initialize, ping, tools/list,
    resources/read, notifications…) is a read spent here. A body without one: one read."""
    spent: list[tuple[str, bool]] = []
    for message in messages:
        method = message.get("method") if isinstance(message, dict) else None
        if not isinstance(method, str):
            continue
        if method == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            spent.append((tool_classes.get(name, "read") if isinstance(name, str) else "read", True))
        else:
            spent.append(("read", False))
    return spent or [("read", False)]


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _bad_id(messages: Sequence[Any]) -> bool:
    """A request whose id is not a string or an integer (an object, array, boolean, float or
    null): the SDK would take it for a notification and never answer it."""
    return any(
        isinstance(m, dict) and "method" in m and "id" in m and not _valid_id(m["id"]) for m in messages
    )


def _invalid_request() -> list[Message]:
    """What the stdio transport answers such a request (mcp/stdio.py): -32600, id null."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INVALID_REQUEST, "message": "invalid request: id must be a string or an integer"},
    }
    return _response(400, body, [])


def _opens_session(messages: Sequence[Any]) -> bool:
    return any(isinstance(m, dict) and m.get("method") == "initialize" for m in messages)


def _user(principal: Principal) -> AuthenticatedUser:
    """The principal as the SDK's request `user`: the SDK binds each session (streamable HTTP
    and SSE) to the user that opened it and answers 404 to anyone else."""
    return AuthenticatedUser(AccessToken(token="", client_id="memhub", scopes=[], subject=principal.id))


def _has_credentials(headers: Headers) -> bool:
    return "x-api-key" in headers or "authorization" in headers


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class BodyTooLarge(Exception):
    pass


async def _read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


@dataclass
class Passed:
    """What the guard learnt about a request it lets through."""

    body: bytes | None
    headers: list[tuple[bytes, bytes]]
    principal: Principal | None
    messages: list[Any]


class GuardMiddleware:
    def __init__(self, app: ASGIApp, policy: GuardPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        refusal, passed = await self._check(scope, receive)
        if refusal is not None or passed is None:
            for message in refusal or []:
                await send(message)
            return
        body, headers = passed.body, passed.headers
        if body is not None:
            replay = [{"type": "http.request", "body": body, "more_body": False}]

            async def receive_again() -> Message:
                return replay.pop() if replay else await receive()

            downstream: Receive = receive_again
        else:
            downstream = receive

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start" and headers:
                message = {**message, "headers": [*message.get("headers", []), *headers]}
            await send(message)

        if self.policy.sessions is None or passed.principal is None:
            await self.app(scope, downstream, send_with_headers)
        else:
            await self._in_session(scope, downstream, send_with_headers, passed)

    async def _check(self, scope: Scope, receive: Receive) -> tuple[list[Message] | None, Passed | None]:
        policy = self.policy
        request_headers = Headers(scope=scope)
        host = request_headers.get("host", "")
        if not _matches(host, policy.allowed_hosts):
            return _error(421, "misdirected_request", "this Host is not served here"), None
        origin = request_headers.get("origin")
        cors: list[tuple[bytes, bytes]] = []
        if origin is not None:
            if not _matches(origin, policy.allowed_origins):
                return _error(403, "forbidden_origin", "this Origin is not allowed"), None
            cors = [
                (b"access-control-allow-origin", origin.encode()),
                (b"vary", b"Origin"),
                (b"access-control-expose-headers", EXPOSED.encode()),
            ]
        method = scope["method"]
        if method == "OPTIONS":
            return self._preflight(request_headers, cors), None
        principal = policy.local
        if policy.authenticate is not None:
            ip_key = f"ip:{_client(scope)}"
            guessing = await policy.ip_limiter.peek_async(ip_key, "read") if policy.ip_limiter else None
            if guessing is not None and not guessing.allowed:  # refused credentials spend reads
                return _error(
                    429, "rate_limited", "too many requests", [*cors, *_rate_headers(guessing)]
                ), None
            principal, reason = await anyio.to_thread.run_sync(policy.authenticate, request_headers)
            if principal is None:
                if policy.ip_limiter is not None:
                    await policy.ip_limiter.take_async(ip_key, "read")
                await anyio.to_thread.run_sync(self._audit, scope, reason)
                www = b'Bearer realm="memhub"' + (
                    b', error="invalid_token"' if _has_credentials(request_headers) else b""
                )
                return _error(401, "unauthorized", reason, [(b"www-authenticate", www), *cors]), None
            scope.setdefault("state", {})[STATE_KEY] = principal
        if principal is not None:
            scope["user"] = _user(principal)
        body = None
        messages: list[Any] = []
        if method == "POST":
            try:
                body = await _read_body(receive, policy.max_body)
            except BodyTooLarge:
                message = f"the request body is larger than {policy.max_body} bytes"
                return _error(413, "payload_too_large", message, cors), None
            messages = _messages(body)
        verdict = await self._limit(scope, principal, _classes(messages, policy.tool_classes))
        headers = [*cors, *_rate_headers(verdict)]
        if verdict is not None and not verdict.allowed:
            wait = max(1, math.ceil(verdict.retry_after_s))
            message = f"rate limit reached ({verdict.limit} calls per minute); retry after {wait} s"
            return _error(429, "rate_limited", message, headers), None
        if _bad_id(messages):
            return _invalid_request(), None
        if scope["path"] in ADMIN_PATHS and principal is not None and principal.role is not GlobalRole.ADMIN:
            return _error(403, "forbidden", f"{scope['path']} needs the admin role", headers), None
        return None, Passed(body, headers, principal, messages)

    async def _limit(
        self, scope: Scope, principal: Principal | None, classes: Sequence[tuple[str, bool]]
    ) -> Verdict | None:
        """The tightest verdict of the client IP's buckets (spent for every method) and the
        principal's (spent for every method but tool calls, which the pipeline spends)."""
        policy = self.policy
        verdicts: list[Verdict] = []
        ip = _client(scope)
        for tool_class, piped in classes:
            if policy.ip_limiter is not None:
                verdicts.append(await policy.ip_limiter.take_async(f"ip:{ip}", tool_class))
            if policy.principal_limiter is not None and principal is not None:
                limiter = policy.principal_limiter
                ask = limiter.peek_async if piped else limiter.take_async
                verdicts.append(await ask(principal.id, tool_class))
        limited = [v for v in verdicts if v.limit > 0]
        if not limited:
            return None
        refused = [v for v in limited if not v.allowed]
        if refused:
            return max(refused, key=lambda v: v.retry_after_s)
        return min(limited, key=lambda v: v.remaining)

    async def _in_session(self, scope: Scope, receive: Receive, send: Send, passed: Passed) -> None:
        """Run the request, keeping the session table (http/sessions.py) up to date: a session
        opened (after closing idle ones when a bound is reached), used, or ended."""
        table, owner = self.policy.sessions, passed.principal
        assert table is not None and owner is not None
        path, method = scope["path"], scope["method"]
        session_id = Headers(scope=scope).get("mcp-session-id")
        opening = (
            path == STREAMABLE_PATH
            and method == "POST"
            and session_id is None
            and _opens_session(passed.messages)
        ) or (path == SSE_PATH and method == "GET")
        if not opening:
            if path != STREAMABLE_PATH or session_id is None:
                await self.app(scope, receive, send)
                return
            status = 0

            async def watch(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            if not table.begin(session_id, owner.id):  # unknown here, or not the caller's
                await self.app(scope, receive, send)
                return
            try:
                await self.app(scope, receive, watch)
            finally:
                table.end(session_id, gone=status == 404 or (method == "DELETE" and 200 <= status < 300))
            return
        key, victims = table.admit(owner.id)
        if key is None:
            message = "too many open sessions; close one or retry later"
            for part in _error(503, "too_many_sessions", message, [(b"retry-after", b"5"), *passed.headers]):
                await send(part)
            return
        opened: str | None = None
        try:
            for victim in victims:
                if victim.close is not None:
                    await victim.close()

            async def watch_opening(message: Message) -> None:
                nonlocal opened
                if message["type"] == "http.response.start" and int(message["status"]) < 400:
                    opened = Headers(raw=message.get("headers", [])).get("mcp-session-id")
                await send(message)

            await self.app(scope, receive, watch_opening if path == STREAMABLE_PATH else send)
        finally:
            table.opened(key, opened, self._closer(opened, scope.get("user")) if opened else None)

    def _closer(self, session_id: str, user: Any) -> Callable[[], Awaitable[None]]:
        """Ends a streamable-HTTP session as its client would: DELETE /mcp with its id."""
        app = self.app

        async def close() -> None:
            scope: Scope = {
                "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "DELETE",
                "scheme": "http", "path": STREAMABLE_PATH, "raw_path": STREAMABLE_PATH.encode(),
                "root_path": "", "query_string": b"", "client": None, "server": None, "state": {},
                "headers": [(b"mcp-session-id", session_id.encode()), (b"host", b"localhost")],
                "user": user,
            }  # fmt: skip
            sent = False

            async def receive() -> Message:
                nonlocal sent
                if sent:
                    return {"type": "http.disconnect"}
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}

            async def discard(message: Message) -> None:
                return None

            with anyio.CancelScope(shield=True):
                await app(scope, receive, discard)

        return close

    def _preflight(self, headers: Headers, cors: list[tuple[bytes, bytes]]) -> list[Message]:
        methods = ", ".join(self.policy.allowed_methods)
        asked = headers.get("access-control-request-method", "")
        if not cors or (asked and asked.upper() not in {m.upper() for m in self.policy.allowed_methods}):
            return _error(403, "forbidden_origin", "this preflight is not allowed")
        allow_headers = (
            "Content-Type, Authorization, X-API-Key, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID"
        )
        extra = [
            (b"access-control-allow-methods", methods.encode()),
            (b"access-control-allow-headers", allow_headers.encode()),
            (b"access-control-max-age", b"600"),
            (b"content-length", b"0"),
        ]
        return [
            {"type": "http.response.start", "status": 204, "headers": [*cors, *extra]},
            {"type": "http.response.body", "body": b""},
        ]

    def _audit(self, scope: Scope, reason: str) -> None:
        if self.policy.audit is None:
            return
        client = scope.get("client")
        detail = {
            "path": str(scope["path"])[:200],
            "client": str(client[0]) if client else "",
            "reason": reason,
        }
        self.policy.audit("unauthorized", detail)
