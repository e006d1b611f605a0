"""One Starlette app for every HTTP transport: POST /mcp, GET /sse (+ /messages/), GET /health."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from mcp.server import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import BaseRoute, Route

from memhub import __version__
from memhub.http.metrics import Gauges, Metrics

HealthProbe = Callable[[], dict[str, Any]]


def build_http_app(
    server: MCPServer, transports: Sequence[str], health: HealthProbe, metrics: Metrics, gauges: Gauges
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
        routes.extend(server.sse_app(sse_path="/sse", message_path="/messages/").routes)
    if "http" not in transports:
        app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/mcp"]
    app.router.routes.extend(routes)
    return app
