"""API-key authentication for the HTTP transports: 401 before the MCP layer sees the request."""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from memhub.auth.identity import STATE_KEY, key_from_headers
from memhub.core.models import Principal

Lookup = Callable[[str], Principal | None]  # key -> principal (blocking; run in a thread)
OPEN_PATHS = ("/health",)


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, lookup: Lookup) -> None:
        self.app = app
        self.lookup = lookup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        key = key_from_headers(Headers(scope=scope))
        principal = await anyio.to_thread.run_sync(self.lookup, key) if key else None
        if principal is None:
            reason = (
                "unknown API key" if key else "an API key is required (X-API-Key or Authorization: Bearer)"
            )
            body = json.dumps({"error": {"code": "unauthorized", "message": reason}}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="memhub"'),
            ]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        scope.setdefault("state", {})[STATE_KEY] = principal
        await self.app(scope, receive, send)
