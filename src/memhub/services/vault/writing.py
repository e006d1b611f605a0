"""vault_create, vault_write and vault_replace: the folder rules, then an atomic write.

Rules (seed 001 §4): `.system/` is reserved (no create, write or replace); under `daily/`
only `daily/YYYY-MM-DD.md` with a real date may be created (vault_create), then only
appended to, never overwritten or replaced; overwrite and append need an existing file
(`conflict` otherwise), create a new one (`conflict` if it exists). An overwrite of a note
that changed outside memhub since memhub last showed it to a client is a `conflict` too:
the client must read it again rather than silently drop someone's edit.
"""

from __future__ import annotations

from memhub.core.errors import conflict, forbidden, invalid, not_found
from memhub.services.runtime import Call
from memhub.services.vault import models as m
from memhub.services.vault.errors import InvalidPath
from memhub.services.vault.files import atomic_write, read_bytes
from memhub.services.vault.notes import decode
from memhub.services.vault.paths import TEMP_MARK, Target, in_daily, is_reserved, valid_daily
from memhub.services.vault.service import run
from memhub.services.vault.state import VaultState


def _writable(state: VaultState, raw: str, *, replace: bool = False) -> Target:
    target = state.vault.resolve(raw)
    if is_reserved(target.rel):
        raise forbidden(".system/ is reserved: nothing there may be created or changed")
    if in_daily(target.rel):
        if replace:
            raise forbidden("daily/ notes are append-only: vault_replace is not allowed there")
        if not valid_daily(target.rel):
            raise forbidden("daily/ only holds daily/YYYY-MM-DD.md notes with a real date")
    if TEMP_MARK in target.path.name:
        raise InvalidPath("that name is reserved for memhub's temporary files")
    return target


def _existing(target: Target, raw: str) -> None:
    if not target.path.exists():
        raise conflict(f"{raw} does not exist: overwrite and append change existing notes (use vault_create)")
    if not target.path.is_file():
        raise InvalidPath(f"{raw} is not a file")


async def vault_create(call: Call, args: m.CreateInput) -> m.WrittenOutput:
    def work(state: VaultState) -> m.WrittenOutput:
        target = _writable(state, args.path)
        if target.path.exists():
            raise conflict(f"{args.path} already exists (use vault_write to change it)")
        data = args.content.encode("utf-8")
        with state.writing():
            folder = target.path.parent
            if folder.exists() and not folder.is_dir():
                raise InvalidPath("a parent of that path is a file")
            folder.mkdir(parents=True, exist_ok=True)
            if not state.vault.inside(folder):
                raise InvalidPath("a parent folder resolves outside the vault")
            snap = atomic_write(target.path, data, base=None)
        state.saw(target.rel, snap.sha256)
        call.detail.update(path=target.rel, written_bytes=len(data))
        return m.WrittenOutput(written_path=target.rel, written_bytes=len(data))

    return await run(call, work, writes=True)


async def vault_write(call: Call, args: m.WriteInput) -> m.WrittenOutput:
    def work(state: VaultState) -> m.WrittenOutput:
        target = _writable(state, args.path)
        if in_daily(target.rel) and args.mode != "append":
            raise forbidden("daily/ notes are append-only: use mode=append")
        _existing(target, args.path)
        payload = args.content.encode("utf-8")
        with state.writing():
            current, base = read_bytes(target.path)
            if args.mode == "overwrite":
                seen = state.last_seen(target.rel)
                if seen is not None and seen != base.sha256:
                    raise conflict(
                        "the note changed outside memhub since it was last read; "
                        "read it again before overwriting"
                    )
                data = payload
            else:
                data = (
                    current
                    + (b"\n" if current and not current.endswith(b"\n") and payload else b"")
                    + payload
                )
            snap = atomic_write(target.path, data, base=base)
        state.saw(target.rel, snap.sha256)
        call.detail.update(path=target.rel, mode=args.mode, written_bytes=len(payload))
        return m.WrittenOutput(written_path=target.rel, written_bytes=len(payload))

    return await run(call, work, writes=True)


async def vault_replace(call: Call, args: m.ReplaceInput) -> m.ReplaceOutput:
    def work(state: VaultState) -> m.ReplaceOutput:
        target = _writable(state, args.path, replace=True)
        if not target.path.exists():
            raise not_found(f"{args.path} not found in the vault")
        _existing(target, args.path)
        limit = args.max_replacements or 1
        with state.writing():
            data, base = read_bytes(target.path)
            text = decode(data)
            if text is None:
                raise invalid("the file is not UTF-8 text")
            found = text.count(args.find)
            if found == 0:
                raise conflict("the find text does not occur in the note")
            count = min(found, limit)
            new = text.replace(args.find, args.replace, count)
            snap = atomic_write(target.path, new.encode("utf-8"), base=base)
        state.saw(target.rel, snap.sha256)
        call.detail.update(path=target.rel, replacements=count)
        return m.ReplaceOutput(written_path=target.rel, replacements=count)

    return await run(call, work, writes=True)
