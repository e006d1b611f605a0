"""vault_ls, vault_read, vault_scan and vault_coverage."""

from __future__ import annotations

from typing import Literal

from memhub.core.errors import invalid
from memhub.services.runtime import Call
from memhub.services.vault import config as c
from memhub.services.vault import models as m
from memhub.services.vault.files import read_text
from memhub.services.vault.notes import split_lines
from memhub.services.vault.paths import TEMP_MARK
from memhub.services.vault.ranges import as_dicts, complement, merge, size
from memhub.services.vault.service import run
from memhub.services.vault.state import VaultState

Cut = Literal["max_chars", "hard_limit"] | None


def _budget(limits: m.Limits | None) -> tuple[int, Literal["max_chars", "hard_limit"]]:
    requested = limits.max_chars if limits and limits.max_chars else c.READ_DEFAULT_MAX_CHARS
    if requested > c.READ_HARD_LIMIT_CHARS:
        return c.READ_HARD_LIMIT_CHARS, "hard_limit"
    return requested, "max_chars"


def take(lines: list[str], start: int, end: int, limits: m.Limits | None) -> tuple[str, int, Cut]:
    """Lines start..end joined, cut at whole lines to the character budget (a first line
    longer than the budget is cut inside). (text, last line returned, why it was cut)."""
    budget, reason = _budget(limits)
    taken: list[str] = []
    used = 0
    for number in range(start, end + 1):
        line = lines[number - 1]
        cost = len(line) + (1 if taken else 0)
        if used + cost > budget:
            if not taken:
                return line[:budget], number, reason
            return "\n".join(taken), number - 1, reason
        taken.append(line)
        used += cost
    return "\n".join(taken), end, None


def _lines(state: VaultState, raw: str) -> tuple[str, list[str]]:
    target = state.vault.existing_file(raw)
    text, snap = read_text(target.path)
    state.saw(target.rel, snap.sha256)
    return target.rel, split_lines(text)


def _start(start: int, total: int) -> None:
    if total and start > total:
        raise invalid(f"start_line {start} is past the end of the file ({total} lines)")


async def vault_ls(call: Call, args: m.LsInput) -> m.LsOutput:
    def work(state: VaultState) -> m.LsOutput:
        target = state.vault.existing_dir(args.relative_dir)
        call.detail.update(relative_dir=target.rel)
        if not target.path.exists():
            return m.LsOutput(entries=[])
        entries = []
        for child in sorted(target.path.iterdir(), key=lambda p: p.name):
            if TEMP_MARK in child.name or not state.vault.inside(child):
                continue
            rel = child.relative_to(state.vault.root).as_posix()
            if child.is_dir():
                entries.append(m.Entry(path=rel, type="dir", size_bytes=None))
            elif child.is_file():
                entries.append(m.Entry(path=rel, type="file", size_bytes=child.stat().st_size))
        call.detail.update(entries=len(entries))
        return m.LsOutput(entries=entries)

    return await run(call, work)


async def vault_read(call: Call, args: m.ReadInput) -> m.ReadOutput:
    def work(state: VaultState) -> m.ReadOutput:
        if not args.full and args.range is None:
            raise invalid("range is required unless full is true")
        rel, lines = _lines(state, args.path)
        total = len(lines)
        if args.full:
            start, end = 1, total
        else:
            assert args.range is not None
            start, end = args.range.start_line or 1, args.range.end_line or total
            if args.range.end_line is not None and end < start:
                raise invalid("range.end_line must not be before range.start_line")
            _start(start, total)
            end = min(end, total)
        if total == 0:
            text, last, cut = "", 0, None
            start = 1
        else:
            text, last, cut = take(lines, start, end, args.limits)
        reason: Literal["max_chars", "range_end", "hard_limit", "none"] = (
            cut if cut else ("range_end" if last < total else "none")
        )
        call.detail.update(path=rel, truncated=cut is not None)
        return m.ReadOutput(
            text=text,
            truncated=cut is not None,
            returned_chars=len(text),
            applied_range=m.Range(start_line=start, end_line=last),
            next_offset=m.NextLine(start_line=last + 1 if last < total else None),
            truncated_reason=reason,
        )

    return await run(call, work)


async def vault_scan(call: Call, args: m.ScanInput) -> m.ScanOutput:
    def work(state: VaultState) -> m.ScanOutput:
        rel, lines = _lines(state, args.path)
        total = len(lines)
        start = args.cursor.start_line if args.cursor and args.cursor.start_line else 1
        _start(start, total)
        chunk = args.chunk_lines or c.VAULT_SCAN_DEFAULT_CHUNK_LINES
        if total == 0:
            text, last, cut = "", 0, None
            start = 1
        else:
            text, last, cut = take(lines, start, min(total, start + chunk - 1), args.limits)
        eof = last >= total
        reason: Literal["max_chars", "chunk_end", "hard_limit", "none"] = (
            cut if cut else ("none" if eof else "chunk_end")
        )
        if eof:
            actions = [m.NextAction(type="vault_coverage", confidence=0.8, params={"path": rel})]
        else:
            actions = [
                m.NextAction(
                    type="vault_scan",
                    confidence=0.9,
                    params={"path": rel, "cursor": {"start_line": last + 1}},
                )
            ]
        applied = m.Range(start_line=start, end_line=last)
        call.detail.update(path=rel, applied_range=applied.model_dump(), eof=eof, truncated_reason=reason)
        return m.ScanOutput(
            text=text,
            applied_range=applied,
            next_cursor=m.NextLine(start_line=None if eof else last + 1),
            eof=eof,
            truncated=cut is not None,
            truncated_reason=reason,
            next_actions=actions,
        )

    return await run(call, work)


def scan_action(path: str, uncovered: list[tuple[int, int]], confidence: float) -> m.NextAction:
    """Scan the first uncovered range (a later pass prefers what is still uncovered)."""
    start, end = uncovered[0] if uncovered else (1, 1)
    chunk = min(c.VAULT_SCAN_MAX_CHUNK_LINES, end - start + 1)
    params = {"path": path, "cursor": {"start_line": start}, "chunk_lines": chunk}
    return m.NextAction(type="vault_scan", confidence=confidence, params=params)


async def vault_coverage(call: Call, args: m.CoverageInput) -> m.CoverageOutput:
    def work(state: VaultState) -> m.CoverageOutput:
        for r in args.cited_ranges:
            if r.end_line < r.start_line:
                raise invalid("cited_ranges: end_line must not be before start_line")
        rel, lines = _lines(state, args.path)
        total = len(lines)
        covered = merge(((r.start_line, r.end_line) for r in args.cited_ranges), total)
        uncovered = complement(covered, total)
        exact = 1.0 if total == 0 else size(covered) / total
        ratio = round(exact, 4)
        meets = exact >= c.COVERAGE_MIN_RATIO
        if meets:
            actions = [m.NextAction(type="artifact_audit", confidence=0.8, params={"source_path": rel})]
        else:
            actions = [scan_action(rel, uncovered, 0.9)]
        call.detail.update(  # at most 100 ranges of each: the audit log stays small
            path=rel,
            coverage_ratio=ratio,
            covered_ranges=as_dicts(covered[:100]),
            uncovered_ranges=as_dicts(uncovered[:100]),
        )
        return m.CoverageOutput(
            path=rel,
            total_lines=total,
            covered_lines=size(covered),
            coverage_ratio=ratio,
            covered_ranges=[m.Range(start_line=s, end_line=e) for s, e in covered],
            uncovered_ranges=[m.Range(start_line=s, end_line=e) for s, e in uncovered],
            meets_min_coverage=meets,
            next_actions=actions,
        )

    return await run(call, work)
