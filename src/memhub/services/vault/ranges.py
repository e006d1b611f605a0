"""Line ranges (1-based, inclusive): normalising cited ranges and what they leave uncovered."""

from __future__ import annotations

from collections.abc import Iterable

Span = tuple[int, int]


def merge(ranges: Iterable[Span], total: int) -> list[Span]:
    """Clip to 1..total, sort, and join overlapping or adjacent ranges ((1,3),(4,6) -> (1,6))."""
    clipped = sorted((max(1, s), min(total, e)) for s, e in ranges if min(total, e) >= max(1, s))
    merged: list[Span] = []
    for start, end in clipped:
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def complement(covered: list[Span], total: int) -> list[Span]:
    gaps: list[Span] = []
    cursor = 1
    for start, end in covered:
        if start > cursor:
            gaps.append((cursor, start - 1))
        cursor = end + 1
    if cursor <= total:
        gaps.append((cursor, total))
    return gaps


def size(ranges: Iterable[Span]) -> int:
    return sum(end - start + 1 for start, end in ranges)


def as_dicts(ranges: Iterable[Span]) -> list[dict[str, int]]:
    return [{"start_line": s, "end_line": e} for s, e in ranges]
