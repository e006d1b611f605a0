"""The operations a person runs from the shell: backup, restore, reindex, export, import.

They go through the same services as the `admin` and `memory_manage` tools (services/ops.py,
the assoc manage service), as a human principal (`via="cli"`), with progress bars on stderr.
Paths are the person's own: relative to the working directory, anywhere they may write.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from memhub.cli.container import Container
from memhub.cli.progress import ProgressBar
from memhub.services import ops
from memhub.services.assoc import manage
from memhub.services.assoc import models as m
from memhub.services.backups import list_backups
from memhub.services.runtime import Call
from memhub.store.base import BACKUP_PARTS, Encryption, Tx
from memhub.store.crypto import key_id, new_key, parse_key

COMMANDS = ("backup", "restore", "reindex", "export", "import", "encryption")


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backup = commands.add_parser("backup", help="take an online backup of the store")
    backup.add_argument(
        "path",
        nargs="?",
        help="backup file (default: $MEMHUB_HOME/backups/memhub-<time>.db); `list`: the backups there",
    )
    backup.add_argument(
        "--exclude", default="", help=f"comma list of parts to leave out: {', '.join(BACKUP_PARTS)}"
    )
    backup.add_argument("--force", action="store_true", help="overwrite an existing file")

    restore = commands.add_parser("restore", help="replace the store's content with a verified backup")
    restore.add_argument("path", help="backup file")
    restore.add_argument("--check", action="store_true", help="only verify the backup")

    commands.add_parser("reindex", help="rebuild the text index and re-embed every item")

    export = commands.add_parser("export", help="export memories (json is lossless and re-importable)")
    export.add_argument("--format", choices=["json", "csv", "markdown"], default="json")
    export.add_argument("--domain", choices=list(m.DOMAINS), help="only this domain")
    export.add_argument("--project-id", help="only this project (proj_…)")
    export.add_argument("-o", "--output", help="file to write (default: stdout)")

    crypt = commands.add_parser("encryption", help="content encryption at rest: new keys, key rotation")
    crypt.add_argument(
        "action", choices=["keygen", "rotate"], help="keygen: print a new key; rotate: re-encrypt"
    )
    crypt.add_argument("--new-key-file", help="rotate: file holding the new key (base64)")
    crypt.add_argument("--decrypt", action="store_true", help="rotate: store the text unencrypted again")

    imported = commands.add_parser("import", help="import a json export (all or nothing)")
    imported.add_argument("path", help="file written by `memhub export` (or a JSON array of memories)")


def _call(container: Container, tool: str, progress: ProgressBar | None = None) -> Call:
    person = replace(container.principal, via="cli")
    return container.call("assoc", person, f"cli.{tool}", progress=progress)


async def run(container: Container, args: argparse.Namespace) -> int:
    runtime = container.runtime
    if args.command == "backup" and args.path == "list":
        for found in list_backups(runtime):
            kind = "daily" if found.daily else "manual"
            print(f"{found.path}\t{found.bytes}\t{kind}")
        return 0
    if args.command == "backup":
        exclude = [part.strip() for part in args.exclude.split(",") if part.strip()]
        path = (
            Path(args.path).expanduser()
            if args.path
            else ops.backup_path(runtime, None, default_name=ops.default_backup_name())
        )
        done = await ops.backup(runtime, path.absolute(), exclude=exclude, force=args.force)
        await _call(container, "backup").record("ok")
        print(json.dumps(done, ensure_ascii=False))
        return 0
    if args.command == "restore":
        result = await ops.restore(runtime, Path(args.path).expanduser().absolute(), apply=not args.check)
        await _call(container, "restore").record("ok")
        print(f"{'restored' if result.restored else 'verified'} {result.path}")
        return 0
    if args.command == "reindex":
        bar = ProgressBar("reindex")
        if runtime.embedding is not None:
            await runtime.embedding.load()
        try:
            details = await ops.reindex(runtime, bar)
        finally:
            bar.close()
        await _call(container, "reindex").record("ok")
        print(json.dumps(details, ensure_ascii=False))
        return 0
    if args.command == "encryption":
        return await _encryption(container, args)
    if args.command == "export":
        query = {"action": "export", "export_format": args.format, "target_domain": args.domain}
        if args.project_id:
            query["project_id"] = args.project_id
        out = await manage.manage(_call(container, "export"), m.ManageInput.model_validate(query))
        text = out.data or ""
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
            print(f"exported {out.count} memories to {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(text + "\n")
        return 0
    bar = ProgressBar("import")
    data = Path(args.path).read_text(encoding="utf-8")
    try:
        out = await manage.manage(
            _call(container, "import", bar),
            m.ManageInput.model_validate({"action": "import", "import_data": data}),
        )
    finally:
        bar.close()
    print(f"imported {out.count} memories", file=sys.stderr)
    return 0


async def _encryption(container: Container, args: argparse.Namespace) -> int:
    if args.action == "keygen":
        print(new_key())  # shown once: keep it in a key file or a secret store
        return 0
    store = container.runtime.store
    if not isinstance(store, Encryption):
        print("memhub: this store cannot encrypt its content", file=sys.stderr)
        return 1
    if bool(args.new_key_file) == bool(args.decrypt):
        print("memhub: encryption rotate needs --new-key-file FILE or --decrypt", file=sys.stderr)
        return 2
    try:
        new = None if args.decrypt else parse_key(Path(args.new_key_file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"memhub: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 2
    await container.runtime.in_thread(container.runtime.deferred.flush)
    call = _call(container, "encryption.rotate")
    call.detail.update(encrypted=new is not None, key_id=key_id(new) if new is not None else None)

    def audit(tx: Tx) -> object:  # in the rotation's own transaction: a crash after it keeps both
        return tx.append_event(call.principal.id, call.tool, "ok", call.detail, at=call.at)

    done = await container.runtime.in_thread(lambda: store.rotate_encryption(new, audit))
    call.audited = True
    state = "unencrypted" if new is None else f"encrypted under key {key_id(new)}"
    print(f"{done} items rewritten, {state}; the text index was rebuilt", file=sys.stderr)
    return 0
