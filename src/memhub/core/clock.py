"""Time as a dependency, so tests can pin it. Timestamps are ISO-8601 UTC strings that sort as text."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def isoformat(moment: datetime) -> str:
    """`2025-12-10T10:00:00.123456Z`: fixed width, so string order is time order."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> datetime:
    """Parse an ISO-8601 timestamp; a naive one is taken as UTC. Raises ValueError."""
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment
