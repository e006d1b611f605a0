"""Notes as memhub reads them: lines, front matter, heading sections, and loose matching keys.

A note is split into *sections* at ATX headings (`#` .. `######`, outside fenced code);
the lines before the first heading form a section of their own and front matter another.
A section longer than SECTION_MAX_LINES is cut into several. Sections are vault_find's
nodes and the chunks the one store indexes.

Matching happens on two folded forms of the text. `fold` (Stage 0) is NFKC, case folding
and whitespace runs collapsed to one space. `loose_fold` (Stage 1) also maps katakana to
hiragana, so `リンゴ` and `りんご` meet. A loose query is a list of terms (English content
words, lightly stemmed; the content words of Japanese runs), each a list of keys (the word
itself; a Japanese word's character bigrams): a text's loose score is the mean over terms
of the share of their keys it contains, so `データベースを移行する` still matches most of
`データベース移行` and `deploys` matches `deployment`.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from array import array
from dataclasses import dataclass
from pathlib import Path

from memhub.core.text import bigrams, query_terms, stem
from memhub.services.vault.config import MAX_NOTE_BYTES, SECTION_MAX_LINES

_WS = re.compile(r"\s+")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_KANA = {code: code - 0x60 for code in range(0x30A1, 0x30F7)}  # katakana -> hiragana


def fold(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def loose_fold(text: str) -> str:
    return fold(text).translate(_KANA)


def split_lines(text: str) -> list[str]:
    """Lines without their terminators; a final newline does not start another line."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def decode(data: bytes) -> str | None:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def front_matter_end(lines: list[str]) -> int:
    """Number of lines of the YAML front matter block (0 when there is none)."""
    if not lines or lines[0].strip() != "---":
        return 0
    for index in range(1, min(len(lines), 500)):
        if lines[index].strip() in ("---", "..."):
            return index + 1
    return 0


@dataclass(frozen=True, slots=True)
class Heading:
    line: int  # 1-based
    level: int
    text: str


def headings(lines: list[str]) -> list[Heading]:
    """ATX headings outside front matter and fenced code blocks."""
    found: list[Heading] = []
    fenced = False
    for index in range(front_matter_end(lines), len(lines)):
        line = lines[index]
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and (match := _HEADING.match(line)):
            found.append(Heading(index + 1, len(match.group(1)), match.group(2)))
    return found


@dataclass(frozen=True, slots=True)
class Span:
    start: int  # 1-based, inclusive
    end: int
    heading: str | None
    a: int  # the section's slice of Note.exact / Note.loose
    b: int


@dataclass(frozen=True, slots=True)
class Section:
    start: int
    end: int
    heading: str | None
    exact: str  # fold(text)
    loose: str  # loose_fold(text)


def spans(lines: list[str], title: str = "") -> tuple[list[Span], str, array[int]]:
    """Heading sections (see the module doc), the note's folded text and where each line's
    folded text lies in it (start, end pairs). A section's text is its lines folded one by
    one and joined by a space (so a query may span lines); sections are joined by newlines
    (a folded query has none, so it never spans two sections). `title` (the file name) is
    folded into the first section so a note is found by its name."""
    bounds: list[tuple[int, int, str | None]] = []
    fm = front_matter_end(lines)
    if fm:
        bounds.append((1, fm, None))
    starts = [(h.line, h.text) for h in headings(lines)]
    body_start = fm + 1
    if body_start <= len(lines) and (not starts or starts[0][0] > body_start):
        starts.insert(0, (body_start, ""))
    for i, (line, text) in enumerate(starts):
        end = starts[i + 1][0] - 1 if i + 1 < len(starts) else len(lines)
        for piece in range(line, end + 1, SECTION_MAX_LINES):
            bounds.append((piece, min(end, piece + SECTION_MAX_LINES - 1), text or None))
    out: list[Span] = []
    parts: list[str] = []
    where = array("i", bytes(8 * len(lines)))
    offset = 0
    for index, (start, end, heading) in enumerate(bounds):
        pieces = [fold(title)] if index == 0 and title else []
        length = len(pieces[0]) if pieces else 0
        for number in range(start, end + 1):
            folded = fold(lines[number - 1])
            if folded:
                length += 1 if pieces else 0
                pieces.append(folded)
            where[2 * number - 2] = offset + length
            length += len(folded)
            where[2 * number - 1] = offset + length
        out.append(Span(start, end, heading, offset, offset + length))
        parts.append(" ".join(pieces))
        offset += length + 1
    return out, "\n".join(parts), where


def sections(lines: list[str], title: str = "") -> list[Section]:
    found, exact, _where = spans(lines, title)
    loose = exact.translate(_KANA)
    return [Section(s.start, s.end, s.heading, exact[s.a : s.b], loose[s.a : s.b]) for s in found]


@dataclass(frozen=True, slots=True)
class LooseQuery:
    terms: tuple[tuple[str, ...], ...]

    def score(self, loose_text: str) -> float:
        if not self.terms:
            return 0.0
        total = 0.0
        for keys in self.terms:
            hits = 0
            for key in keys:
                if key in loose_text:
                    hits += 1
            total += hits / len(keys)
        return total / len(self.terms)

    def keys_found(self, loose_text: str) -> set[int]:
        """Indexes of the terms with at least half their keys in the text."""
        return {
            i
            for i, keys in enumerate(self.terms)
            if sum(1 for key in keys if key in loose_text) * 2 >= len(keys)
        }


def loose_query(query: str) -> LooseQuery:
    terms: list[tuple[str, ...]] = []
    seen: set[tuple[str, ...]] = set()
    pieces = query_terms(query, drop_stopwords=True, split_cjk=True) or query_terms(query, split_cjk=True)
    for cjk, term in pieces:
        keys = tuple(dict.fromkeys(bigrams(term.translate(_KANA)))) if cjk else (stem(term),)
        if keys not in seen:
            seen.add(keys)
            terms.append(keys)
    return LooseQuery(tuple(terms))


@dataclass(frozen=True, slots=True)
class Note:
    rel: str
    mtime_ns: int
    size: int
    text: str
    lines: tuple[str, ...]
    sha256: str
    spans: tuple[Span, ...]
    exact: str  # every section folded (Stage 0), newline-separated
    loose: str  # the same, katakana folded to hiragana (Stage 1); offsets as in `exact`
    where: array[int]  # line n's folded text is exact[where[2n-2]:where[2n-1]]

    def line_exact(self, number: int) -> str:
        return self.exact[self.where[2 * number - 2] : self.where[2 * number - 1]]

    def line_loose(self, number: int) -> str:
        return self.loose[self.where[2 * number - 2] : self.where[2 * number - 1]]


def parse_note(rel: str, data: bytes, mtime_ns: int) -> Note | None:
    text = decode(data)
    if text is None:
        return None
    lines = split_lines(text)
    found, exact, where = spans(lines, Path(rel).stem)
    return Note(
        rel=rel,
        mtime_ns=mtime_ns,
        size=len(data),
        text=text,
        lines=tuple(lines),
        sha256=hashlib.sha256(data).hexdigest(),
        spans=tuple(found),
        exact=exact,
        loose=exact.translate(_KANA),
        where=where,
    )


class NoteCache:
    """Parsed notes keyed by path, re-read when their mtime or size changes (thread-safe)."""

    def __init__(self) -> None:
        self._notes: dict[str, Note] = {}
        self._lock = threading.Lock()

    def get(self, root: Path, rel: str, mtime_ns: int, size: int) -> Note | None:
        """The note, or None when it is too large or not UTF-8 text."""
        with self._lock:
            note = self._notes.get(rel)
        if note is not None and note.mtime_ns == mtime_ns and note.size == size:
            return note
        if size > MAX_NOTE_BYTES:
            return None
        try:
            data = (root / rel).read_bytes()
        except OSError:
            return None
        note = parse_note(rel, data, mtime_ns)
        with self._lock:
            if note is None:
                self._notes.pop(rel, None)
            else:
                self._notes[rel] = note
        return note

    def forget(self, rel: str) -> None:
        with self._lock:
            self._notes.pop(rel, None)

    def prune(self, alive: set[str]) -> None:
        with self._lock:
            for rel in [r for r in self._notes if r not in alive]:
                del self._notes[rel]
