"""`memhub` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from memhub import __version__
from memhub.audit.chain import verify_chain
from memhub.auth.identity import key_hash, new_key
from memhub.cli.container import Container, build_container
from memhub.core.errors import MemhubError
from memhub.core.settings import Settings, load_settings
from memhub.mcp.stdio import serve_stdio

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
    serve.add_argument("--embedder", help="auto, e5, use, hash or none")
    serve.add_argument("--auth", choices=["none", "apikey"], help="HTTP authentication (default none)")

    apikey = commands.add_parser("apikey", help="manage API keys for HTTP clients")
    apikey.add_argument("action", choices=["create", "revoke", "list"])
    apikey.add_argument("name", nargs="?", help="the user the key belongs to")
    apikey.add_argument("--admin", action="store_true", help="give the user the admin role")
    for name in ("home", "db", "user", "project"):
        serve.add_argument(f"--{name}", dest=f"serve_{name}", help=argparse.SUPPRESS)

    commands.add_parser("doctor", help="verify the database and the audit chain")
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
                lambda: {"db": str(settings.db_path)},
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
            tg.start_soon(uvicorn.Server(config).serve)
        if "stdio" in settings.transports:
            await serve_stdio(server)  # memhub's transport: every line is answered
            tg.cancel_scope.cancel()  # the stdio client owns this process: its EOF ends it
        else:
            await anyio.sleep_forever()


def _doctor(container: Container) -> int:
    store = container.runtime.store
    problems = store.integrity_check()
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
    except MemhubError as exc:
        print(f"memhub: {exc.message}", file=sys.stderr)
        return 2
    try:
        if args.command == "serve":
            anyio.run(_serve, container)
            return 0
        if args.command == "apikey":
            return _apikey(container, args)
        return _doctor(container)
    except KeyboardInterrupt:
        return 130
    finally:
        container.close()


if __name__ == "__main__":
    sys.exit(main())
