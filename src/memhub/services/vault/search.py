"""vault_search: line matches in plain, regex (default) or loose mode.

plain: the query as a substring after NFKC, case folding and whitespace folding. regex:
a pattern of the `regex` module, evaluated with a time bound for the whole call
(REGEX_TIMEOUT_MS) and releasing the GIL, so `(a|aa)+$` on a long line ends with partial
results and a warning instead of stalling the server; an invalid pattern falls back to
plain (seed 001 allows it) and the answer says so in `mode` and `warnings`. loose: lines
holding at least LOOSE_MIN_SCORE of the query's loose keys, best first.
"""

from __future__ import annotations

import bisect
import time

import regex

from memhub.services.runtime import Call
from memhub.services.vault import config as c
from memhub.services.vault import models as m
from memhub.services.vault.notes import LooseQuery, Note, fold, loose_query
from memhub.services.vault.scope import notes_in_scope
from memhub.services.vault.service import run
from memhub.services.vault.state import VaultState


def snippet(line: str, at: int = 0) -> str:
    line = line.strip()
    if len(line) <= c.SNIPPET_CHARS:
        return line
    start = max(0, min(at - c.SNIPPET_CHARS // 4, len(line) - c.SNIPPET_CHARS))
    return line[start : start + c.SNIPPET_CHARS]


def _notes(state: VaultState, args: m.SearchInput) -> list[Note]:
    notes = []
    for rel, st in notes_in_scope(state, args.relative_dir, args.glob):
        note = state.cache.get(state.vault.root, rel, st.st_mtime_ns, st.st_size)
        if note is not None:
            notes.append(note)
    return notes


def _plain(notes: list[Note], query: str, limit: int) -> list[m.SearchHit]:
    needle = fold(query)
    hits: list[m.SearchHit] = []
    for note in notes:
        if needle not in note.exact:
            continue
        for span in note.spans:
            if needle not in note.exact[span.a : span.b]:
                continue
            for number in range(span.start, span.end + 1):
                if needle in note.line_exact(number):
                    line = note.lines[number - 1]
                    hits.append(m.SearchHit(path=note.rel, snippet=snippet(line), line=number))
                    if len(hits) > limit:
                        return hits
    return hits


def _perfect_lines(
    notes: list[Note], loose: LooseQuery, limit: int, note_scores: list[float]
) -> list[tuple[float, str, int, str]] | None:
    """The first `limit` + 1 lines holding every key, in path order, if there are that many
    (then nothing can rank before them); fills `note_scores` on the way."""
    found: list[tuple[float, str, int, str]] = []
    for note in notes:
        score = loose.score(note.loose)
        note_scores.append(score)
        if score < 1.0:
            continue
        for span in note.spans:
            if loose.score(note.loose[span.a : span.b]) < 1.0:
                continue
            for number in range(span.start, span.end + 1):
                if loose.score(note.line_loose(number)) >= 1.0:
                    found.append((-1.0, note.rel, number, note.lines[number - 1]))
                    if len(found) > limit:
                        return found
    return None


def _loose(notes: list[Note], query: str, limit: int) -> list[m.SearchHit]:
    """Lines scoring at least LOOSE_MIN_SCORE, best first, then in path order.

    When more than `limit` lines hold every key, the first of them in path order are the
    answer. Otherwise: a line holds a part of its section's keys, so a section's score bounds
    its lines'; sections are visited best first, and the walk stops once `limit` + 1 lines
    rank before anything the next section could hold.
    """
    loose = loose_query(query)
    note_scores: list[float] = []
    found = _perfect_lines(notes, loose, limit, note_scores)
    if found is None:
        sections: list[tuple[float, str, int, int, int]] = []  # (-score, path, start, end, note index)
        for index, note in enumerate(notes):
            if note_scores[index] < c.LOOSE_MIN_SCORE:
                continue
            for span in note.spans:
                score = loose.score(note.loose[span.a : span.b])
                if score >= c.LOOSE_MIN_SCORE:
                    sections.append((-score, note.rel, span.start, span.end, index))
        sections.sort()
        found = []
        for bound, rel, start, end, index in sections:
            if len(found) > limit and found[limit][:3] <= (bound, rel, start):
                break
            note = notes[index]
            for number in range(start, end + 1):
                score = loose.score(note.line_loose(number))
                if score >= c.LOOSE_MIN_SCORE:
                    bisect.insort(found, (-score, rel, number, note.lines[number - 1]))
    return [m.SearchHit(path=rel, snippet=snippet(line), line=n) for _s, rel, n, line in found[: limit + 1]]


def _regex(
    notes: list[Note], pattern: regex.Pattern[str], limit: int, warnings: list[str]
) -> tuple[list[m.SearchHit], bool]:
    deadline = time.monotonic() + c.REGEX_TIMEOUT_MS / 1000
    hits: list[m.SearchHit] = []
    for note in notes:
        remaining = deadline - time.monotonic()
        last_line = 0
        try:
            if remaining <= 0:
                raise TimeoutError
            for found in pattern.finditer(note.text, timeout=remaining, concurrent=True):
                number = note.text.count("\n", 0, found.start()) + 1
                if number == last_line or number > len(note.lines):
                    continue
                last_line = number
                line_start = note.text.rfind("\n", 0, found.start()) + 1
                line = note.lines[number - 1]
                hits.append(
                    m.SearchHit(path=note.rel, snippet=snippet(line, found.start() - line_start), line=number)
                )
                if len(hits) > limit:
                    return hits, False
        except TimeoutError:
            warnings.append(
                f"regex evaluation stopped after {c.REGEX_TIMEOUT_MS} ms: results are partial "
                "(simplify the pattern or use mode=plain)"
            )
            return hits, True
    return hits, False


async def vault_search(call: Call, args: m.SearchInput) -> m.SearchOutput:
    def work(state: VaultState) -> m.SearchOutput:
        limit = args.limit or c.SEARCH_DEFAULT_LIMIT
        mode = args.mode or "regex"
        warnings: list[str] = []
        timed_out = False
        notes = _notes(state, args)
        compiled: regex.Pattern[str] | None = None
        if mode == "regex":
            try:
                compiled = regex.compile(args.query, regex.MULTILINE)
            except (regex.error, OverflowError, RecursionError):
                mode = "plain"
                warnings.append("the query is not a valid regular expression: searched as plain text")
        if compiled is not None:
            hits, timed_out = _regex(notes, compiled, limit, warnings)
        elif mode == "loose":
            hits = _loose(notes, args.query, limit)
        else:
            hits = _plain(notes, args.query, limit)
        truncated = timed_out or len(hits) > limit
        call.detail.update(mode=mode, results=min(len(hits), limit), truncated=truncated, files=len(notes))
        return m.SearchOutput(results=hits[:limit], mode=mode, warnings=warnings, truncated=truncated)

    return await run(call, work)
