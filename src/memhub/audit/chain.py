"""Verify the audit log's hash chain: any edited, inserted or removed event breaks it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memhub.core.hashing import GENESIS_HASH, event_hash
from memhub.store.base import EventRow


@dataclass(frozen=True)
class ChainReport:
    events: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_chain(events: Iterable[EventRow]) -> ChainReport:
    problems: list[str] = []
    prev = GENESIS_HASH
    count = 0
    for event in events:
        count += 1
        if event.prev_hash != prev:
            problems.append(f"event {event.id}: does not follow the previous event (chain broken)")
        expected = event_hash(
            event.prev_hash, event.at, event.principal, event.tool, event.outcome, event.detail
        )
        if event.hash != expected:
            problems.append(f"event {event.id}: content does not match its hash (edited)")
        prev = event.hash
    return ChainReport(events=count, problems=problems)
