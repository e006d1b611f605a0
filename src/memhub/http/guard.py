"""The HTTP front door: every request to /mcp, /sse and /messages/ passes here first.

In order: Host allowed (421), Origin allowed (403), a CORS preflight answered (204), the
caller authenticated (401 with `WWW-Authenticate`, audited; nothing executed), the body
bounded (413), rate limits per client IP and per principal by tool class (429 with
`Retry-After`). Answers carry `X-RateLimit-Limit/Remaining/Reset` whenever a limit applies,
and CORS headers for an allowed Origin. `/health` stays open.

The limits are the call pipeline's own `RateLimiter` (services/ratelimit.py): per client IP
here, per principal in the pipeline; this layer only peeks at the principal's bucket, so a
call is never counted twice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memhub.auth.identity import STATE_KEY
from memhub.core.models import Principal
from memhub.services.ratelimit import RateLimiter, Verdict

Authenticate = Callable[[Mapping[str, str]], tuple[Principal | None, str]]  # blocking
Audit = Callable[[str, dict[str, Any]], None]  # (outcome, detail) of a refused request
OPEN_PATHS = ("/health",)
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


def _tool_calls(body: bytes) -> list[str]:
    """The tool names a JSON-RPC body (one message or a batch) calls."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return []
    messages = data if isinstance(data, list) else [data]
    names = []
    for message in messages:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            names.append(name if isinstance(name, str) else "")
    return names


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


class GuardMiddleware:
    def __init__(self, app: ASGIApp, policy: GuardPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        refusal, extra = await self._check(scope, receive)
        if refusal is not None:
            for message in refusal:
                await send(message)
            return
        body, headers = extra
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

        await self.app(scope, downstream, send_with_headers)

    async def _check(
        self, scope: Scope, receive: Receive
    ) -> tuple[list[Message] | None, tuple[bytes | None, list[tuple[bytes, bytes]]]]:
        policy = self.policy
        request_headers = Headers(scope=scope)
        host = request_headers.get("host", "")
        if not _matches(host, policy.allowed_hosts):
            return _error(421, "misdirected_request", "this Host is not served here"), (None, [])
        origin = request_headers.get("origin")
        cors: list[tuple[bytes, bytes]] = []
        if origin is not None:
            if not _matches(origin, policy.allowed_origins):
                return _error(403, "forbidden_origin", "this Origin is not allowed"), (None, [])
            cors = [
                (b"access-control-allow-origin", origin.encode()),
                (b"vary", b"Origin"),
                (b"access-control-expose-headers", EXPOSED.encode()),
            ]
        method = scope["method"]
        if method == "OPTIONS":
            return self._preflight(request_headers, cors), (None, [])
        principal = policy.local
        if policy.authenticate is not None:
            ip_key = f"ip:{_client(scope)}"
            guessing = policy.ip_limiter.peek(ip_key, "read") if policy.ip_limiter else None
            if guessing is not None and not guessing.allowed:  # refused credentials spend reads
                refusal = _error(429, "rate_limited", "too many requests", [*cors, *_rate_headers(guessing)])
                return refusal, (None, [])
            principal, reason = await anyio.to_thread.run_sync(policy.authenticate, request_headers)
            if principal is None:
                if policy.ip_limiter is not None:
                    policy.ip_limiter.take(ip_key, "read")
                await anyio.to_thread.run_sync(self._audit, scope, reason)
                www = b'Bearer realm="memhub"' + (
                    b', error="invalid_token"' if _has_credentials(request_headers) else b""
                )
                return _error(401, "unauthorized", reason, [(b"www-authenticate", www), *cors]), (None, [])
            scope.setdefault("state", {})[STATE_KEY] = principal
        body = None
        classes = ["read"]
        if method == "POST":
            try:
                body = await _read_body(receive, policy.max_body)
            except BodyTooLarge:
                message = f"the request body is larger than {policy.max_body} bytes"
                return _error(413, "payload_too_large", message, cors), (None, [])
            names = _tool_calls(body)
            classes = [policy.tool_classes.get(name, "read") for name in names]
        verdict = self._limit(scope, principal, classes, spend=method == "POST" and bool(body))
        headers = [*cors, *_rate_headers(verdict)]
        if verdict is not None and not verdict.allowed:
            wait = max(1, math.ceil(verdict.retry_after_s))
            message = f"rate limit reached ({verdict.limit} calls per minute); retry after {wait} s"
            return _error(429, "rate_limited", message, headers), (None, [])
        return None, (body, headers)

    def _limit(
        self, scope: Scope, principal: Principal | None, classes: Sequence[str], *, spend: bool
    ) -> Verdict | None:
        """The tightest verdict of the client IP's buckets (spent for tool calls) and the
        principal's (peeked: the pipeline spends them)."""
        policy = self.policy
        verdicts: list[Verdict] = []
        ip = _client(scope)
        for tool_class in classes or ["read"]:
            if policy.ip_limiter is not None:
                take = policy.ip_limiter.take if spend and classes else policy.ip_limiter.peek
                verdicts.append(take(f"ip:{ip}", tool_class))
            if policy.principal_limiter is not None and principal is not None:
                verdicts.append(policy.principal_limiter.peek(principal.id, tool_class))
        limited = [v for v in verdicts if v.limit > 0]
        if not limited:
            return None
        refused = [v for v in limited if not v.allowed]
        if refused:
            return max(refused, key=lambda v: v.retry_after_s)
        return min(limited, key=lambda v: v.remaining)

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
