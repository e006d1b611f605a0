"""One Starlette app for every HTTP transport: POST /mcp, GET /sse (+ /messages/), GET /health."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from memhub import __version__
from memhub.http.metrics import Gauges, Metrics

HealthProbe = Callable[[], dict[str, Any]]


LOOPBACK_SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)


def sse_routes(
    server: Server[Any], sse_path: str = "/sse", message_path: str = "/messages/"
) -> list[BaseRoute]:
    """The SSE transport: `GET /sse` opens a stream (one MCP connection), clients post to
    `message_path`. Each connection runs the server loop over the SDK's SSE transport."""
    transport = SseServerTransport(message_path, security_settings=LOOPBACK_SECURITY)

    async def connect(request: Request) -> Response:
        async with transport.connect_sse(request.scope, request.receive, request._send) as (reader, writer):
            await server.run(reader, writer, server.create_initialization_options())
        return Response()

    return [Route(sse_path, connect, methods=["GET"]), Mount(message_path, app=transport.handle_post_message)]


def build_http_app(
    server: Server[Any], transports: Sequence[str], health: HealthProbe, metrics: Metrics, gauges: Gauges
) -> Starlette:
    """The streamable HTTP app owns the session manager's lifespan; SSE routes join its router."""
    started = time.monotonic()

    async def health_endpoint(request: Request) -> JSONResponse:
        body = {"status": "ok", "version": __version__, "uptime_s": round(time.monotonic() - started, 1)}
        body.update(health())
        return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)

    async def metrics_endpoint(request: Request) -> PlainTextResponse:
        return PlainTextResponse(metrics.render(gauges()), media_type="text/plain; version=0.0.4")

    app = server.streamable_http_app(streamable_http_path="/mcp")
    routes: list[BaseRoute] = [
        Route("/health", health_endpoint, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
    ]
    if "sse" in transports:
        routes.extend(sse_routes(server))
    if "http" not in transports:
        app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/mcp"]
    app.router.routes.extend(routes)
    return app
