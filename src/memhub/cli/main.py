"""`memhub` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from memhub import __version__
from memhub.audit.chain import verify_chain
from memhub.auth.identity import key_hash, new_key
from memhub.cli import ops as cli_ops
from memhub.cli import policy as cli_policy
from memhub.cli.container import Container, build_container
from memhub.core.errors import MemhubError
from memhub.core.settings import Settings, load_settings
from memhub.mcp.server import run_stdio
from memhub.search.embedders import EMBEDDER_NAMES, available_embedders
from memhub.store.base import Checks

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memhub", description="Local-first MCP memory server.")
    parser.add_argument("--version", action="version", version=f"memhub {__version__}")
    parser.add_argument("--home", help="data directory (env MEMHUB_HOME)")
    parser.add_argument("--db", help="SQLite database file (env MEMHUB_DB)")
    parser.add_argument("--user", help="local user name (env MEMHUB_USER)")
    parser.add_argument("--project", help="current project name (env MEMHUB_PROJECT)")
    parser.add_argument("--log-level", dest="log_level", help="stderr log level (env MEMHUB_LOG_LEVEL)")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the MCP server")
    serve.add_argument("--transport", dest="transports", help="comma list of stdio,http,sse (default stdio)")
    serve.add_argument("--toolsets", help="comma list of toolsets to serve (default: all)")
    serve.add_argument("--host", help="HTTP/SSE bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP/SSE port (default 8000)")
    installed = available_embedders()
    serve.add_argument(
        "--embedder",
        metavar="NAME",
        help=f"embedding backend, one of {', '.join(EMBEDDER_NAMES)}; default auto: the best installed "
        f"(e5+use when both models are; here: {installed[0]}). hash needs no model (tests); "
        "none searches text only. Installed here: " + ", ".join(installed),
    )
    serve.add_argument("--auth", choices=["none", "apikey"], help="HTTP authentication (default none)")

    apikey = commands.add_parser("apikey", help="manage API keys for HTTP clients")
    apikey.add_argument("action", choices=["create", "revoke", "list"])
    apikey.add_argument("name", nargs="?", help="the user the key belongs to")
    apikey.add_argument("--admin", action="store_true", help="give the user the admin role")
    for name in ("home", "db", "user", "project"):
        serve.add_argument(f"--{name}", dest=f"serve_{name}", help=argparse.SUPPRESS)

    commands.add_parser("doctor", help="verify the database and the audit chain")
    cli_ops.add_parsers(commands)
    cli_policy.add_parser(commands)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        key: getattr(args, key, None)
        for key in (
            "home",
            "db",
            "user",
            "project",
            "log_level",
            "transports",
            "toolsets",
            "host",
            "port",
            "embedder",
            "auth",
        )
    }
    for name in ("home", "db", "user", "project"):
        late = getattr(args, f"serve_{name}", None)
        if late is not None:
            overrides[name] = late
    return load_settings(os.environ, overrides, Path.cwd())


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
    base = f"http://{settings.host}:{settings.port}"
    paths = [p for t, p in (("http", "/mcp"), ("sse", "/sse")) if t in settings.transports]
    urls = ", ".join(f"{base}{path}" for path in paths)
    return (
        f"memhub {__version__} ready: {urls} (health {base}/health); store {settings.db_url}; "
        f"toolsets {', '.join(container.toolsets)}; {_embedder_state(container)}"
    )


async def _announce_when_listening(server: Any, container: Container) -> None:
    """Print `ready_line` once uvicorn has bound its socket (`started`), then return."""
    with anyio.move_on_after(60):
        while not server.started:
            if server.should_exit:
                return
            await anyio.sleep(0.05)
        print(ready_line(container), file=sys.stderr, flush=True)


async def _serve(container: Container) -> None:
    settings = container.settings
    server = container.server
    async with anyio.create_task_group() as tg:
        tg.start_soon(container.run_background)
        if {"http", "sse"} & set(settings.transports):
            import uvicorn

            from memhub.http.app import build_http_app

            app = build_http_app(
                server,
                settings.transports,
                lambda: {"db": settings.db_url},
                container.metrics,
                container.gauges,
            )
            if settings.auth == "apikey":
                from memhub.http.auth import ApiKeyMiddleware

                app = ApiKeyMiddleware(app, container.principal_for_key)  # type: ignore[assignment]
            config = uvicorn.Config(
                app,
                host=settings.host,
                port=settings.port,
                log_level=settings.log_level.lower(),
                lifespan="on",
            )
            web = uvicorn.Server(config)
            tg.start_soon(web.serve)
            tg.start_soon(_announce_when_listening, web, container)
        if "stdio" in settings.transports:
            await run_stdio(server)
            tg.cancel_scope.cancel()  # the stdio client owns this process: its EOF ends it
        else:
            await anyio.sleep_forever()


def _doctor(container: Container) -> int:
    store = container.runtime.store
    problems = store.integrity_check() if isinstance(store, Checks) else []
    report = verify_chain(store.iter_events())
    print(f"database: {store.location}")
    print(f"integrity: {'ok' if not problems else 'FAILED'}")
    for problem in problems:
        print(f"  {problem}")
    print(f"audit chain: {report.events} events, {'ok' if report.ok else 'BROKEN'}")
    for problem in report.problems[:50]:
        print(f"  {problem}")
    return 0 if report.ok and not problems else 1


def _apikey(container: Container, args: argparse.Namespace) -> int:
    store = container.runtime.store
    if args.action == "list":
        with store.transaction(write=False) as tx:
            for row in tx.list_principals():
                print(f"{row.id}\t{row.role}\t{'key' if tx.has_api_key(row.id) else '-'}")
        return 0
    if not args.name:
        print("memhub: apikey create/revoke need a user name", file=sys.stderr)
        return 2
    with store.transaction(write=True) as tx:
        tx.ensure_principal(args.name)
        if args.action == "revoke":
            tx.set_api_key(args.name, None)
            print(f"revoked the API key of {args.name}")
            return 0
        key = new_key()
        tx.set_api_key(args.name, key_hash(key), "admin" if args.admin else None)
    print(key)  # shown once: only its hash is stored
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"memhub: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr,
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if (
        args.command == "serve"
        and settings.host not in LOOPBACK
        and {"http", "sse"} & set(settings.transports)
    ):
        print("memhub: HTTP without authentication binds to loopback only (127.0.0.1, ::1)", file=sys.stderr)
        return 2
    try:
        container = build_container(settings)
    except (MemhubError, ValueError) as exc:
        print(f"memhub: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    try:
        if args.command == "serve":
            anyio.run(_serve, container)
            return 0
        if args.command == "apikey":
            return _apikey(container, args)
        if args.command == "policy":
            return anyio.run(cli_policy.run, container, args)
        if args.command in cli_ops.COMMANDS:
            return anyio.run(cli_ops.run, container, args)
        return _doctor(container)
    except MemhubError as exc:
        print(f"memhub: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        container.close()


if __name__ == "__main__":
    sys.exit(main())
