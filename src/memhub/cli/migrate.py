"""`memhub migrate --from SQLITE --to postgresql://…`: move a store to PostgreSQL, verified.

The copy and its verification are store/migrate.py's, in one transaction on the target. Here:
the locations, the source's encryption key (the copy is decrypted: PostgreSQL stores text in
clear), a progress bar on stderr, one line per outcome on stdout, and, when the source was
encrypted, the sealed proposal files of the home folder rewritten in clear (a store without a
key reads only those). Exit 0: copied and verified; 1: the copy failed or did not verify
(the target is left as it was); 2: a location, a key or a non-empty target to fix first.
Errors are one line, never a traceback, and never show a password of the target's URL.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memhub.audit.chain import verify_chain
from memhub.cli.container import encryption_keys
from memhub.cli.progress import ProgressBar
from memhub.core.errors import ErrorKind, MemhubError
from memhub.core.settings import Settings
from memhub.services.decisions.proposals import unseal_files
from memhub.store.base import Store, Tx
from memhub.store.open import open_store


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    migrate = commands.add_parser(
        "migrate", help="copy a SQLite store into an empty PostgreSQL database, all or nothing, verified"
    )
    migrate.add_argument(
        "--from", dest="source", help="the SQLite store: a path or sqlite:///path (default: --db, $MEMHUB_DB)"
    )
    migrate.add_argument("--to", dest="target", required=True, help="postgresql://… of an empty database")
    migrate.add_argument(
        "--replace", action="store_true", help="empty a target that holds data first (its data is lost)"
    )


def _sqlite_path(location: str) -> Path | None:
    scheme, sep, rest = location.partition("://")
    if not sep:
        return Path(location).expanduser()
    if scheme != "sqlite":
        return None
    return Path(rest.removeprefix("/") if rest.startswith("//") else rest).expanduser()


def run(settings: Settings, args: argparse.Namespace) -> int:
    source_url = args.source or settings.db_url
    path = _sqlite_path(source_url)
    if path is None:
        return _fail("--from must be a SQLite store (a path or sqlite:///path)", 2)
    if not path.is_file():
        return _fail(f"no SQLite store at {path}", 2)
    if args.target.partition("://")[0] not in ("postgresql", "postgres"):
        return _fail("--to must be a PostgreSQL URL (postgresql://user@host/database)", 2)
    try:
        keys = encryption_keys(settings)
    except ValueError as exc:
        return _fail(str(exc), 2)
    try:
        source = open_store(path, keys=keys, check=True)
    except MemhubError as exc:
        return _fail(f"the source: {exc.message}", 2 if exc.kind is ErrorKind.STORAGE else 1)
    try:
        return _copy(settings, source, args)
    finally:
        source.close()


def _copy(settings: Settings, source: Store, args: argparse.Namespace) -> int:
    try:
        target = open_store(args.target)
    except (MemhubError, ValueError) as exc:
        return _fail(f"the target: {getattr(exc, 'message', exc)}", 1)
    from memhub.store.migrate import Outcome, migrate  # PostgreSQL's driver: once a target opened

    def audit(tx: Tx, done: Outcome) -> object:  # the target's first own event, after the copied chain
        detail = {"source": "sqlite", "rows": sum(done.copied.values()), "decrypted": done.decrypted}
        return tx.append_event(settings.user, "cli.migrate", "ok", detail)

    bar = ProgressBar("migrate")
    try:
        outcome = migrate(
            source,
            target,
            check_chain=lambda events: verify_chain(events).problems,
            replace=args.replace,
            progress=bar.update,
            audit=audit,
        )
    except MemhubError as exc:
        return _fail(exc.message, 2 if exc.kind is ErrorKind.INVALID else 1)
    except KeyboardInterrupt:
        return _fail("interrupted; nothing was written", 130)
    finally:
        bar.close()
        target.close()
    rows = sum(outcome.copied.values())
    print(f"copied {rows} rows to {target.location}: " + json.dumps(outcome.copied))
    print(
        f"verified: row counts equal, audit chain ok ({outcome.events} events),"
        f" {outcome.searches} keyword searches answer the same"
    )
    if outcome.decrypted:
        cipher = getattr(source, "cipher", None)
        unsealed = unseal_files(settings.proposals_dir, cipher) if cipher is not None else 0
        print(f"decrypted: the copy holds text in clear; {unsealed} sealed proposal files rewritten in clear")
    return 0


def _fail(message: str, code: int) -> int:
    print(f"memhub: migrate: {message}", file=sys.stderr)
    return code
