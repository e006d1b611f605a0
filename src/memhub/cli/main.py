"""`memhub` command line.

Start-up: the imports below (the MCP SDK, pydantic, numpy, memhub's toolsets) create ~160,000
container objects that live as long as the process, so the cyclic garbage collector is held
off while they are made (its ~250 collections then free next to nothing and cost ~0.2 s of
CPU per start on a slow machine, ~8% of `initialize`), and they are frozen out of later
collections once made (`gc.freeze`: no full collection walks them again). The collector's
prior state is restored.

The MCP SDK's import builds the validator and serializer of every pydantic model of every
protocol version it speaks (`mcp_types`), though a session uses a few of them: ~0.1 s of CPU, a
sixth of the SDK's import. While these imports run, pydantic's `defer_build` is the default of
every model defined (memhub's own set it already): a model is built when it is first used, as
pydantic documents for that option (concurrent first uses are safe with the pinned pydantic,
whose `model_rebuild` holds a lock; older releases raced there: see pyproject.toml). The classes
made meanwhile keep the option, and so do their later subclasses; a model defined afterwards on
`BaseModel` itself gets pydantic's default, which is restored once the imports are done.
"""

from __future__ import annotations

import gc

_COLLECTING = gc.isenabled()
gc.disable()
_DEFAULT_CONFIG: pydantic.ConfigDict | None = None

try:
    import pydantic

    _DEFAULT_CONFIG = pydantic.BaseModel.model_config
    pydantic.BaseModel.model_config = pydantic.ConfigDict(**{**_DEFAULT_CONFIG, "defer_build": True})

    import argparse
    import logging
    import os
    import sys
    from collections.abc import Sequence
    from pathlib import Path

    # numpy's OpenBLAS starts a thread per core for every product that is large enough and its
    # threads spin between products; the server's concurrency is its own threads (searches, the
    # indexer), so a second BLAS thread only competes with them: one search by meaning cost twice
    # the CPU and time with two (docs/benchmarks.md). Read when numpy loads: set before it does.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

    import anyio

    from memhub import __version__
    from memhub.audit.chain import verify_chain
    from memhub.auth.identity import ensure_key_holder, key_hash, new_key
    from memhub.cli import decisions as cli_decisions
    from memhub.cli import migrate as cli_migrate
    from memhub.cli import ops as cli_ops
    from memhub.cli import policy as cli_policy
    from memhub.cli.container import Container, build_container
    from memhub.cli.serve import serve
    from memhub.core.errors import MemhubError
    from memhub.core.settings import Settings, load_settings
    from memhub.search.embedders import EMBEDDER_NAMES, available_embedders
    from memhub.store.base import Checks, Store
    from memhub.store.sqlite.database import memhub_tables
    from memhub.store.sqlite.doctor import Diagnosis, diagnose

    gc.freeze()  # every object made so far lives as long as the process: no collection looks at them again
finally:  # an import that fails must not leave the collector off in the caller's process
    if _COLLECTING:
        gc.enable()
    if _DEFAULT_CONFIG is not None:  # models defined later on BaseModel: pydantic's default
        pydantic.BaseModel.model_config = _DEFAULT_CONFIG

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
# Libraries that log message bodies below WARNING (sse_starlette: every SSE chunk; the MCP SDK:
# every JSON-RPC message; httpx/httpcore: requests and responses).
QUIET_LIBRARIES = ("sse_starlette", "mcp", "mcp_types", "httpx", "httpcore", "httpx2", "httpcore2")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memhub", description="Local-first MCP memory server.")
    parser.add_argument("--version", action="version", version=f"memhub {__version__}")
    parser.add_argument("--home", help="data directory (env MEMHUB_HOME)")
    parser.add_argument("--db", help="the store: a SQLite file or postgresql://… (env MEMHUB_DB)")
    parser.add_argument("--vault", help="folder of Markdown notes (env MEMHUB_VAULT)")
    parser.add_argument("--user", help="local user name (env MEMHUB_USER)")
    parser.add_argument("--project", help="current project name (env MEMHUB_PROJECT)")
    parser.add_argument("--log-level", dest="log_level", help="stderr log level (env MEMHUB_LOG_LEVEL)")
    parser.add_argument("--config", help="JSON or TOML config file (env MEMHUB_CONFIG); flags win over it")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the MCP server")
    serve.add_argument("--transport", dest="transports", help="comma list of stdio,http,sse (default stdio)")
    serve.add_argument("--toolsets", help="comma list of toolsets to serve (default: all)")
    serve.add_argument("--host", help="HTTP/SSE bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP/SSE port (default 8000)")
    serve.add_argument("--http-port", dest="http_port", type=int, help="port of POST /mcp (default --port)")
    serve.add_argument("--sse-port", dest="sse_port", type=int, help="port of /sse (default: the HTTP port)")
    serve.add_argument("--tls-cert", dest="tls_cert", help="PEM certificate: serve HTTPS (TLS 1.3 minimum)")
    serve.add_argument("--tls-key", dest="tls_key", help="PEM private key of --tls-cert")
    serve.add_argument("--allowed-hosts", dest="allowed_hosts", help="comma list of Host headers accepted")
    serve.add_argument(
        "--allowed-origins", dest="allowed_origins", help="comma list of Origins accepted (CORS)"
    )
    installed = available_embedders()
    serve.add_argument(
        "--embedder",
        metavar="NAME",
        help=f"embedding backend, one of {', '.join(EMBEDDER_NAMES)}; default auto: the best installed "
        f"(e5+use when both models are; here: {installed[0]}). hash needs no model (tests); "
        "none searches text only. Installed here: " + ", ".join(installed),
    )
    serve.add_argument("--auth", choices=["none", "apikey", "jwt"], help="HTTP authentication (default none)")
    serve.add_argument(
        "--trusted-proxies",
        dest="trusted_proxies",
        help="comma list of proxy addresses whose X-Forwarded-For is believed (default: none)",
    )

    apikey = commands.add_parser("apikey", help="manage API keys for HTTP clients")
    apikey.add_argument("action", choices=["create", "revoke", "list"])
    apikey.add_argument("name", nargs="?", help="the user the key belongs to")
    apikey.add_argument("--admin", action="store_true", help="give the user the admin role")
    for name in ("home", "db", "vault", "user", "project", "config"):
        serve.add_argument(f"--{name}", dest=f"serve_{name}", help=argparse.SUPPRESS)

    commands.add_parser("doctor", help="verify the database and the audit chain")
    cli_ops.add_parsers(commands)
    cli_decisions.add_parsers(commands)
    cli_policy.add_parser(commands)
    cli_migrate.add_parser(commands)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        key: getattr(args, key, None)
        for key in (
            "home",
            "db",
            "vault",
            "user",
            "project",
            "log_level",
            "transports",
            "toolsets",
            "host",
            "port",
            "embedder",
            "auth",
            "config",
            "http_port",
            "sse_port",
            "tls_cert",
            "tls_key",
            "allowed_hosts",
            "allowed_origins",
            "trusted_proxies",
        )
    }
    for name in ("home", "db", "vault", "user", "project", "config"):
        late = getattr(args, f"serve_{name}", None)
        if late is not None:
            overrides[name] = late
    return load_settings(os.environ, overrides, Path.cwd())


def configure_logging(level: str) -> None:
    """memhub's own loggers at `level`, on stderr. The libraries under the transports log whole
    JSON-RPC messages (stored text, secrets) at DEBUG and INFO: they stay at WARNING or above."""
    logging.basicConfig(
        stream=sys.stderr, level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    floor = max(logging.getLogger().getEffectiveLevel(), logging.WARNING)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(floor)


def _diagnosis(settings: Settings) -> Diagnosis:
    """The file-level findings (store/sqlite/doctor.py), read-only, for a SQLite store."""
    try:
        path = settings.db_path
    except ValueError:
        return Diagnosis()  # not a file: only the store's own checks apply
    return diagnose(path, memhub_tables())


def _doctor(settings: Settings) -> int:
    """Name what is wrong: the file (header, WAL, SQLite's integrity check, memhub's tables and
    invariants) read-only first; only a file SQLite reads whole is then opened as a store for
    the text index check, the row counts and the audit chain. On PostgreSQL (no file): the
    store's own checks, the row counts and the audit chain. Exit 1 on any damage, never a
    traceback."""
    found = _diagnosis(settings)
    damage = [f"{f.area}: {f.text}" for f in found.findings if f.damage]
    notes = [f"{f.area}: {f.text}" for f in found.findings if not f.damage]
    if not found.openable:
        print(f"database: {settings.db_url}")
        print("integrity: FAILED")
        for problem in damage:
            print(f"  {problem}")
        for note in notes:
            print(f"  note: {note}")
        print("audit chain: not checked (the file is damaged; nothing was written to it)")
        return 1
    try:
        container = build_container(settings)
    except (MemhubError, ValueError) as exc:
        print(f"memhub: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    try:
        store = container.runtime.store
        problems = [*damage, *(store.integrity_check() if isinstance(store, Checks) else [])]
        report = verify_chain(store.iter_events())
        rows = _row_counts(store)
    finally:
        container.close()
    print(f"database: {store.location}")
    print(f"integrity: {'ok' if not problems else 'FAILED'}")
    for problem in problems:
        print(f"  {problem}")
    for note in notes:
        print(f"  note: {note}")
    print("rows: " + (", ".join(f"{table} {n}" for table, n in rows.items()) if rows else "not counted"))
    print(f"audit chain: {report.events} events, {'ok' if report.ok else 'BROKEN'}")
    for problem in report.problems[:50]:
        print(f"  {problem}")
    return 0 if report.ok and not problems else 1


def _row_counts(store: Store) -> dict[str, int]:
    """Rows per table (empty: the store could not count them; its damage is reported above)."""
    try:
        with store.transaction(write=False) as tx:
            return tx.table_counts()
    except MemhubError:
        return {}


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
        if args.action == "revoke":
            tx.ensure_principal(args.name)
            tx.set_api_key(args.name, None)
            print(f"revoked the API key of {args.name}")
            return 0
        ensure_key_holder(tx, args.name)
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
    configure_logging(settings.log_level)
    if (
        args.command == "serve"
        and settings.host not in LOOPBACK
        and settings.auth == "none"
        and {"http", "sse"} & set(settings.transports)
    ):
        print("memhub: HTTP without authentication binds to loopback only (127.0.0.1, ::1)", file=sys.stderr)
        return 2
    if args.command == "doctor":
        return _doctor(settings)
    if args.command == "migrate":
        return cli_migrate.run(settings, args)
    try:
        container = build_container(settings, check_store=args.command == "serve")
    except (MemhubError, ValueError) as exc:
        print(f"memhub: {getattr(exc, 'message', exc)}", file=sys.stderr)
        return 2
    try:
        if args.command == "serve":
            anyio.run(serve, container)
            return 0
        if args.command == "apikey":
            return _apikey(container, args)
        if args.command == "policy":
            return anyio.run(cli_policy.run, container, args)
        if args.command in cli_ops.COMMANDS:
            return anyio.run(cli_ops.run, container, args)
        if args.command in cli_decisions.COMMANDS:
            return anyio.run(cli_decisions.run, container, args)
        raise AssertionError(f"unknown command {args.command}")
    except MemhubError as exc:
        print(f"memhub: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        container.close()


if __name__ == "__main__":
    sys.exit(main())
