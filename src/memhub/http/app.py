"""The Starlette apps of the HTTP transports: POST /mcp; GET /sse (+ POST /sse and /messages/);
GET /health, /ready and /metrics on every listener.

/health is liveness (the process answers; nothing else is asked). /ready is readiness for a
load balancer: the store reachable and its migrations applied (services/readiness.py), 200
or 503.

`build_http_app` builds one listener's app for the transports it serves: one app for both
(the default, one port) or one per transport (`--http-port`/`--sse-port`). Every app is
wrapped in the guard (http/guard.py): Host/Origin, CORS, authentication, body size and rate
limits are checked there, for every route but /health, before the SDK sees a request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memhub import __version__
from memhub.http.guard import GuardMiddleware, GuardPolicy
from memhub.http.metrics import Gauges, Metrics

log = logging.getLogger(__name__)
HealthProbe = Callable[[], dict[str, Any]]
ReadyProbe = Callable[[], Awaitable[tuple[bool, dict[str, Any]]]]

# Host and Origin are checked by the guard for every route, against the configured lists;
# the SDK transports keep only their Content-Type check.
CHECKED_BY_GUARD = TransportSecuritySettings(enable_dns_rebinding_protection=False)
HEARTBEAT = b": heartbeat\r\n\r\n"


@dataclass(frozen=True)
class HttpOptions:
    max_body: int = 4 * 1024 * 1024
    heartbeat_s: float = 30.0  # SSE comment lines this often (0: none)
    max_sse: int = 100  # open SSE streams at most (0: unlimited)


class SseEndpoint:
    """`GET /sse` opens a stream (one MCP connection, heartbeats every `heartbeat_s`);
    `POST /sse?session_id=…` (seed 003) and `POST /messages/?session_id=…` carry the
    client's messages. Streams beyond `max_sse` are refused with 503."""

    def __init__(self, server: Server[Any], options: HttpOptions, message_path: str = "/messages/") -> None:
        self.server = server
        self.options = options
        self.transport = SseServerTransport(
            message_path, security_settings=CHECKED_BY_GUARD, max_request_body_size=options.max_body
        )
        self.open = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        if method == "POST":
            await self.transport.handle_post_message(scope, receive, send)
        elif method == "GET":
            await self.stream(scope, receive, send)
        else:
            await PlainTextResponse("GET or POST", status_code=405, headers={"Allow": "GET, POST"})(
                scope, receive, send
            )

    async def stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.options.max_sse and self.open >= self.options.max_sse:
            body = {"error": {"code": "too_many_connections", "message": "too many open SSE streams"}}
            await JSONResponse(body, status_code=503, headers={"Retry-After": "5"})(scope, receive, send)
            return
        self.open += 1
        lock = anyio.Lock()
        state = {"started": False, "done": False}

        async def locked_send(message: Message) -> None:
            async with lock:
                await send(message)
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["done"] = True

        async def heartbeat() -> None:
            while True:
                await anyio.sleep(self.options.heartbeat_s)
                if state["done"]:
                    return
                if state["started"]:
                    try:
                        await locked_send(
                            {"type": "http.response.body", "body": HEARTBEAT, "more_body": True}
                        )
                    except OSError:
                        return

        try:
            async with anyio.create_task_group() as tasks:
                if self.options.heartbeat_s > 0:
                    tasks.start_soon(heartbeat)
                async with self.transport.connect_sse(scope, receive, locked_send) as (reader, writer):
                    await self.server.run(reader, writer, self.server.create_initialization_options())
                tasks.cancel_scope.cancel()
        finally:
            self.open -= 1


def build_http_app(
    server: Server[Any],
    transports: Sequence[str],
    health: HealthProbe,
    metrics: Metrics,
    gauges: Gauges,
    *,
    options: HttpOptions | None = None,
    guard: GuardPolicy | None = None,
    ready: ReadyProbe | None = None,
) -> ASGIApp:
    """One listener's app serving `transports` ("http", "sse" or both); the streamable HTTP
    app (when served) owns the session manager's lifespan."""
    options = options or HttpOptions()
    started = time.monotonic()

    async def health_endpoint(request: Request) -> JSONResponse:
        body = {"status": "ok", "version": __version__, "uptime_s": round(time.monotonic() - started, 1)}
        body.update(health())
        return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)

    async def ready_endpoint(request: Request) -> JSONResponse:
        ok, details = await ready() if ready is not None else (True, {})
        body = {"status": "ready" if ok else "not ready", "version": __version__, **details}
        return JSONResponse(body, status_code=200 if ok else 503)

    async def metrics_endpoint(request: Request) -> PlainTextResponse:
        return PlainTextResponse(metrics.render(gauges()), media_type="text/plain; version=0.0.4")

    routes: list[BaseRoute] = [
        Route("/health", health_endpoint, methods=["GET"]),
        Route("/ready", ready_endpoint, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
    ]
    if "sse" in transports:
        sse = SseEndpoint(server, options)
        routes.append(Route("/sse", sse, methods=["GET", "POST"]))
        routes.append(Mount("/messages/", app=sse.transport.handle_post_message))
    if "http" in transports:
        app = server.streamable_http_app(
            streamable_http_path="/mcp",
            transport_security=CHECKED_BY_GUARD,
            max_request_body_size=options.max_body,
        )
        app.router.routes.extend(routes)
    else:
        app = Starlette(routes=routes)
    if guard is None:  # tests building a bare app: loopback only, no authentication
        from memhub.http.guard import default_hosts, default_origins

        hosts = default_hosts("127.0.0.1")
        guard = GuardPolicy(hosts, default_origins(hosts), ("GET", "POST", "OPTIONS"), options.max_body)
    return GuardMiddleware(app, guard)
