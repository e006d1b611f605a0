"""Links between notes as Obsidian writes them, and how they resolve.

`[[name]]`, `[[name|alias]]`, `[[name#Heading]]`, `[[#Heading]]`, `![[embed.png]]` and
Markdown links `[text](folder/note.md)` (URLs with a scheme are not links between notes).
A wiki link with a `/` names a path from the vault root; without, a file name anywhere
(the one in the linking note's folder first, then the shortest path), `.md` optional.
A Markdown link is relative to the linking note's folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote

from memhub.services.vault.notes import fold, headings
from memhub.services.vault.paths import Vault

_WIKI = re.compile(r"(!?)\[\[([^\[\]|#\n]*)(?:#(\^?)([^\[\]|\n]*))?(?:\|[^\[\]\n]*)?\]\]")
_MD = re.compile(r"(!?)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True, slots=True)
class Link:
    line: int  # 1-based line of the linking note
    target: str  # as written ("" for a link inside the note)
    anchor: str | None  # heading or block id after # or ^
    block: bool  # the anchor is a ^block id
    markdown: bool


def links(lines: list[str] | tuple[str, ...]) -> list[Link]:
    found: list[Link] = []
    fenced = False
    for number, line in enumerate(lines, 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in _WIKI.finditer(line):
            anchor = match.group(4)
            found.append(Link(number, match.group(2).strip(), anchor.strip() if anchor else None,
                              match.group(3) == "^", False))  # fmt: skip
        for match in _MD.finditer(line):
            raw = match.group(2)
            if _SCHEME.match(raw) or raw.startswith("<"):
                continue
            path, _, anchor = raw.partition("#")
            found.append(Link(number, unquote(path), unquote(anchor) or None, False, True))
    return found


class Names:
    """Every file of the vault (dot folders skipped), by path and by folded name."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths: set[str] = set()
        self.by_name: dict[str, list[str]] = {}
        for rel in paths:
            name = rel.rsplit("/", 1)[-1]
            self.paths.add(rel)
            self.by_name.setdefault(fold(name), []).append(rel)
            if name.lower().endswith(".md"):
                self.by_name.setdefault(fold(name[:-3]), []).append(rel)

    @classmethod
    def of_vault(cls, vault: Vault) -> Names:
        """Every file of the vault, attachments included (dot folders skipped)."""
        found: list[str] = []
        for folder, dirs, files in os.walk(vault.root):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            base = PurePosixPath(os.path.relpath(folder, vault.root))
            found += [str(base / name) if str(base) != "." else name for name in files]
        return cls(found)

    def resolve(self, link: Link, source: str) -> str | None:
        """The vault path `link` (in note `source`) points to, or None."""
        if not link.target:
            return source
        folder = PurePosixPath(source).parent
        if link.markdown:
            parts: list[str] = []
            for part in (folder / link.target).parts:
                if part == "..":
                    if not parts:
                        return None
                    parts.pop()
                elif part != ".":
                    parts.append(part)
            rel = "/".join(parts)
            return rel if rel in self.paths else (rel + ".md" if rel + ".md" in self.paths else None)
        if "/" in link.target:
            rel = link.target.lstrip("/")
            for candidate in (rel, rel + ".md"):
                if candidate in self.paths:
                    return candidate
            return None
        options = self.by_name.get(fold(link.target), [])
        if not options:
            return None
        local = [p for p in options if PurePosixPath(p).parent == folder]
        return (local or sorted(options, key=lambda p: (p.count("/"), p)))[0]


def has_anchor(lines: list[str] | tuple[str, ...], link: Link) -> bool:
    """Whether the heading (or ^block id) a link names exists in the target's lines."""
    if link.anchor is None:
        return True
    if link.block:
        return any(line.rstrip().endswith(f"^{link.anchor}") for line in lines)
    wanted = fold(link.anchor.split("#")[-1])
    return any(fold(h.text) == wanted for h in headings(list(lines)))
