"""Which notes a find or search looks at: a folder (`relative_dir`) and a `glob`.

A glob without `/` matches file names (`*.md`, `2026-*`); with `/` it matches the path
from the vault root (`projects/**/*.md`): `**` spans folders, `*` and `?` stay within one
name, `[abc]` is a character class. Globs are translated to a pattern evaluated with a
time bound, so no glob can stall the server.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import regex

from memhub.core.errors import invalid
from memhub.services.vault.state import VaultState

MAX_WILDCARDS = 16


def glob_matcher(glob: str | None) -> Callable[[str], bool]:
    if not glob or glob in ("*", "**", "**/*"):
        return lambda _rel: True
    if glob.count("*") + glob.count("?") > MAX_WILDCARDS or "\x00" in glob:
        raise invalid(f"glob may hold at most {MAX_WILDCARDS} wildcards")
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (close := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : close].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = close + 1
            continue
        else:
            out.append(regex.escape(char))
        i += 1
    try:
        pattern = regex.compile("".join(out) + r"\Z", regex.DOTALL)
    except regex.error:
        raise invalid("glob is not a valid pattern") from None
    by_name = "/" not in glob

    def match(rel: str) -> bool:
        subject = rel.rsplit("/", 1)[-1] if by_name else rel
        try:
            return pattern.match(subject, timeout=0.05) is not None
        except TimeoutError:
            return False

    return match


def notes_in_scope(
    state: VaultState, relative_dir: str | None, glob: str | None
) -> Iterator[tuple[str, os.stat_result]]:
    """The notes of the vault's current listing under `relative_dir` matching `glob`."""
    start = state.vault.existing_dir(relative_dir)
    prefix = start.rel + "/" if start.rel else ""
    matches = glob_matcher(glob)
    for rel, st in state.listing().files:
        if rel.startswith(prefix) and matches(rel):
            yield rel, st
