"""`memhub serve`: stdio, and the HTTP listeners (one port for both HTTP transports, or one each),
with TLS when a certificate is configured, and the daily backup beside them."""

from __future__ import annotations

import logging
import ssl
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from memhub import __version__
from memhub.cli.container import Container
from memhub.core.errors import MemhubError
from memhub.core.settings import Settings
from memhub.mcp.stdio import serve_stdio
from memhub.services import ops
from memhub.services.backups import DailyBackups
from memhub.services.readiness import readiness
from memhub.services.vault.state import VaultState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listener:
    port: int
    transports: tuple[str, ...]  # "http", "sse" or both


def listeners(settings: Settings) -> list[Listener]:
    """`--http-port` and `--sse-port` apart: two listeners; otherwise one serving both."""
    web = tuple(t for t in ("http", "sse") if t in settings.transports)
    if not web:
        return []
    if web == ("http", "sse") and settings.sse_listen_port != settings.http_listen_port:
        return [Listener(settings.http_listen_port, ("http",)), Listener(settings.sse_listen_port, ("sse",))]
    return [Listener(settings.http_listen_port if "http" in web else settings.sse_listen_port, web)]


def _embedder_state(container: Container) -> str:
    embedding = container.runtime.embedding
    if embedding is None:
        return "embedder none (text search only)"
    if embedding.error:
        return f"embedder {embedding.id} failed: {embedding.error} (text search only)"
    return f"embedder {embedding.id} " + ("ready" if embedding.ready else "loading in the background")


def ready_line(container: Container) -> str:
    """The one line `serve` prints to stderr once HTTP is up: where, what store, what is served."""
    settings = container.settings
    scheme = "https" if settings.tls_cert else "http"
    urls, health = [], []
    for listener in listeners(settings):
        base = f"{scheme}://{settings.host}:{listener.port}"
        urls += [f"{base}{p}" for t, p in (("http", "/mcp"), ("sse", "/sse")) if t in listener.transports]
        health.append(f"{base}/health")
    return (
        f"memhub {__version__} ready: {', '.join(urls)} (health {', '.join(health)}); "
        f"store {settings.db_url}; toolsets {', '.join(container.toolsets)}; {_embedder_state(container)}"
    )


async def _announce_when_listening(servers: list[Any], container: Container) -> None:
    """Print `ready_line` once every uvicorn server has bound its socket, then return."""
    with anyio.move_on_after(60):
        while not all(server.started for server in servers):
            if any(server.should_exit for server in servers):
                return
            await anyio.sleep(0.05)
        print(ready_line(container), file=sys.stderr, flush=True)


def _uvicorn(container: Container, listener: Listener, policy: Any) -> Any:
    import uvicorn

    from memhub.http.app import HttpOptions, build_http_app
    from memhub.http.dashboard.app import with_dashboard

    settings = container.settings
    options = HttpOptions(
        max_body=settings.max_body_bytes,
        heartbeat_s=settings.sse_heartbeat_s,
        max_sse=settings.sse_max_connections,
    )
    app = build_http_app(
        container.server,
        listener.transports,
        lambda: {"db": public_location(settings.db_url)},
        container.metrics,
        container.gauges,
        options=options,
        guard=policy,
        ready=partial(readiness, container.runtime),
    )
    if "http" in listener.transports:  # the web dashboard at / (http/dashboard/)
        app = with_dashboard(
            app, container.runtime, policy, secure=bool(settings.tls_cert), states=container.states,
            metrics=container.metrics,
        )  # fmt: skip
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=listener.port,
        log_level=settings.log_level.lower(),
        lifespan="on",
        ssl_certfile=settings.tls_cert or None,
        ssl_keyfile=settings.tls_key or None,
        backlog=512,
        # X-Forwarded-For/-Proto only from the proxies named in `trusted_proxies` (uvicorn's own
        # default believes any loopback client, which would let a local caller pick its "IP")
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=list(settings.trusted_proxies) or None,
    )
    config.load()
    if config.ssl is not None:
        minimum = ssl.TLSVersion.TLSv1_3 if settings.tls_min_version == "1.3" else ssl.TLSVersion.TLSv1_2
        config.ssl.minimum_version = minimum
    return uvicorn.Server(config)


async def _sweep_vault(container: Container) -> None:
    """At start, beside the transports: delete temporary files of vault writes that were killed."""
    state = container.states.get("vault")
    if not isinstance(state, VaultState) or "vault" not in container.toolsets:
        return
    try:
        await anyio.to_thread.run_sync(state.sweep)
    except MemhubError as exc:
        log.warning("vault temporary files not swept: %s", exc.message)


async def serve(container: Container) -> None:
    settings = container.settings
    async with anyio.create_task_group() as tg:
        tg.start_soon(container.run_background)
        tg.start_soon(_sweep_vault, container)
        refused = ops.no_backups(container.runtime.store)
        if settings.backup_time and refused:
            log.info("no daily backups: %s", refused)
        elif settings.backup_time:
            daily = DailyBackups(container.runtime, settings.backup_time, settings.backup_keep)
            tg.start_soon(daily.run_forever)
        web = listeners(settings)
        if web:
            policy = container.guard_policy()
            servers = [_uvicorn(container, listener, policy) for listener in web]
            for server in servers:
                tg.start_soon(server.serve)
            tg.start_soon(_announce_when_listening, servers, container)
        if "stdio" in settings.transports:
            await serve_stdio(container.server)  # memhub's transport: every line is answered
            tg.cancel_scope.cancel()  # the stdio client owns this process: its EOF ends it
        else:
            await anyio.sleep_forever()


def public_location(url: str) -> str:
    """What the unauthenticated /health may say about the store: a file's name (not where it
    lives), a server URL without its credentials."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme == "sqlite":
        return Path(rest if sep else url).name
    return f"{scheme}://{rest.rpartition('@')[2].split('/', 1)[0]}"
