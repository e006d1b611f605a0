"""Where a vault path may lead: inside the root, nowhere else.

A path from a client is checked twice. First as text: NUL and control characters,
backslashes, `:` (drive letters, URLs), percent-encoded bytes, empty or `.` segments,
Unicode look-alikes that NFKC turns into `/`, `\\` or `..`, and over-long names are
`invalid_path`; absolute paths, `~` and `..` segments are `out_of_scope`. Then on disk: the
path is resolved with every symlink followed and must still be inside the (resolved) root,
else `out_of_scope`. Rules about reserved folders (`.system/`, `daily/`) look at the
resolved path, so a symlink cannot smuggle a write into them.
"""

from __future__ import annotations

import datetime
import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memhub.core.errors import forbidden, not_found
from memhub.services.vault.config import MAX_NAME_BYTES, MAX_PATH_CHARS, TEXT_SUFFIXES
from memhub.services.vault.errors import InvalidPath, OutOfScope

RESERVED = ".system"
DAILY = "daily"
TEMP_MARK = ".memhub-tmp-"
_ENCODED = re.compile(r"%[0-9A-Fa-f]{2}")
_DAILY_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.md$")


@dataclass(frozen=True, slots=True)
class Target:
    rel: str  # posix path of the resolved target relative to the root ("" for the root)
    path: Path  # absolute, symlinks resolved


def _segments(raw: str, *, allow_root: bool) -> list[str]:
    if any(ord(c) < 32 or ord(c) == 0x7F for c in raw):
        raise InvalidPath("path contains a NUL or control character")
    if len(raw) > MAX_PATH_CHARS:
        raise InvalidPath(f"path is longer than {MAX_PATH_CHARS} characters")
    if raw.startswith(("/", "~")):
        raise OutOfScope("absolute paths are outside the vault; use a path relative to the vault root")
    if "\\" in raw:
        raise InvalidPath("use / as the path separator (backslashes are not allowed)")
    if ":" in raw:
        raise OutOfScope("drive letters and URLs are outside the vault (':' is not allowed)")
    if _ENCODED.search(raw):
        raise InvalidPath("percent-encoded characters are not allowed in a path")
    folded = unicodedata.normalize("NFKC", raw)
    if folded != raw and (
        folded.count("/") != raw.count("/")
        or any(c in folded for c in "\\:")
        or any(s in (".", "..") for s in folded.split("/"))
    ):
        raise InvalidPath("path contains Unicode look-alikes of path separators or dots")
    if raw.endswith("/") and not allow_root:
        raise InvalidPath("a file path must not end with '/'")
    text = raw.removesuffix("/") if len(raw) > 1 else raw
    if text in ("", "."):
        if allow_root:
            return []
        raise InvalidPath("path is empty")
    parts = text.split("/")
    for part in parts:
        if part == "..":
            raise OutOfScope("'..' leads outside the vault")
        if part in ("", "."):
            raise InvalidPath("path has an empty or '.' segment")
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise InvalidPath(f"a path segment is longer than {MAX_NAME_BYTES} bytes")
    return parts


def first_segment(rel: str) -> str:
    return rel.split("/", 1)[0].casefold()


def is_reserved(rel: str) -> bool:
    return first_segment(rel) == RESERVED


def in_daily(rel: str) -> bool:
    return first_segment(rel) == DAILY and "/" in rel


def valid_daily(rel: str) -> bool:
    """`daily/YYYY-MM-DD.md` directly under daily/, with a date that exists."""
    parts = rel.split("/")
    match = _DAILY_NAME.match(parts[-1]) if len(parts) == 2 else None
    if match is None:
        return False
    year, month, day = (int(g) for g in match.groups())
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return True


def is_text_name(name: str) -> bool:
    return name.lower().endswith(TEXT_SUFFIXES) and not name.startswith(".")


class Vault:
    """A vault root and the only ways to turn client paths into files under it."""

    def __init__(self, root: Path, owner: str) -> None:
        self.root = Path(os.path.realpath(root))
        self.owner = owner

    def check_owner(self, principal: str) -> None:
        if principal != self.owner:
            raise forbidden("the vault belongs to its local user; other principals may not use it")

    def resolve(self, raw: str | None, *, allow_root: bool = False) -> Target:
        parts = _segments(raw or "", allow_root=allow_root or raw is None)
        joined = self.root.joinpath(*parts)
        if parts and not os.path.lexists(joined):
            joined = self._same_name(parts)
        real = Path(os.path.realpath(joined))
        if real != self.root and self.root not in real.parents:
            raise OutOfScope("path resolves outside the vault (a symlink points out)")
        rel = real.relative_to(self.root).as_posix()
        return Target("" if rel == "." else rel, real)

    def _same_name(self, parts: list[str]) -> Path:
        """`parts` with each missing name replaced by an existing one equal to it in NFC: a note
        named on macOS (decomposed `ガ` = `カ` + `゛`) is found from a composed name, and back."""
        current = self.root
        for part in parts:
            candidate = current / part
            if not os.path.lexists(candidate) and current.is_dir():
                wanted = unicodedata.normalize("NFC", part)
                try:
                    names = os.listdir(current)
                except OSError:
                    names = []
                for name in names:
                    if unicodedata.normalize("NFC", name) == wanted:
                        candidate = current / name
                        break
            current = candidate
        return current

    def existing_file(self, raw: str) -> Target:
        target = self.resolve(raw)
        if not target.path.is_file():
            if target.path.exists():
                raise InvalidPath(f"{raw} is a folder, not a file")
            raise not_found(f"{raw} not found in the vault")
        return target

    def existing_dir(self, raw: str | None) -> Target:
        target = self.resolve(raw, allow_root=True)
        if target.rel == "" and not target.path.exists():
            return target  # an empty vault: nothing created yet
        if not target.path.is_dir():
            if target.path.exists():
                raise InvalidPath(f"{raw} is a file, not a folder")
            raise not_found(f"folder {raw} not found in the vault")
        return target

    def inside(self, path: Path) -> bool:
        real = Path(os.path.realpath(path))
        return real == self.root or self.root in real.parents

    def text_files(self, start: Target) -> Iterator[tuple[str, os.stat_result]]:
        """(relative path, stat) of every note under `start`, in path order (a folder's files,
        then its sub-folders): dot folders (.obsidian, .git, .trash, .system) and dot files
        skipped, folder symlinks not followed, file symlinks kept only when they resolve
        inside the vault."""
        if not start.path.is_dir():
            return
        root = str(self.root)
        stack = [str(start.path)]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as scan:
                    entries = sorted(scan, key=lambda e: e.name)
            except OSError:
                continue
            subdirs = []
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.path)
                        continue
                    if not is_text_name(entry.name):
                        continue
                    if entry.is_symlink() and not self.inside(Path(entry.path)):
                        continue
                    st = entry.stat()
                except OSError:
                    continue
                yield entry.path[len(root) + 1 :], st
            stack.extend(reversed(subdirs))
