"""Shared vocabulary of the store contract tests: a pinned clock, viewers, and a seeding helper
that goes through the protocol methods only (no SQL), so every backend is seeded the same way."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from memhub.core.models import ProjectRole, SessionRule, Viewer
from memhub.store.base import ItemQuery, ItemRow, NewItem, SessionRow, Store

START = datetime(2030, 1, 1, tzinfo=UTC)
VIEW_NOW = "2031-01-01T00:00:00.000000Z"  # later than anything the clock hands out in a test
PAST = "2020-01-01T00:00:00.000000Z"
FUTURE = "2099-01-01T00:00:00.000000Z"
ALL_CLASSES = frozenset({"public", "internal", "pii", "secret"})

OpenStore = Callable[[], Store]  # opens one more Store on the database under test


class TickClock:
    """Each call one second after the previous: every transaction gets its own, ordered `now`."""

    def __init__(self) -> None:
        self._ticks = itertools.count()
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return START + timedelta(seconds=next(self._ticks))


def viewer(
    principal: str = "alice",
    *,
    session_id: str | None = None,
    sessions: SessionRule = "own",
    boundaries: frozenset[str] | None = None,
    now: str = VIEW_NOW,
) -> Viewer:
    """A viewer at VIEW_NOW; `boundaries` None keeps the default (public + internal)."""
    if boundaries is None:
        return Viewer(principal=principal, now=now, session_id=session_id, sessions=sessions)
    return Viewer(
        principal=principal, now=now, session_id=session_id, sessions=sessions, boundaries=boundaries
    )


class Seed:
    """Adds rows through the protocol, one write transaction per call (so timestamps differ)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def item(self, body: str = "body", **fields: Any) -> ItemRow:
        """An item; defaults: a global memory of alice."""
        fields.setdefault("kind", "memory")
        fields.setdefault("owner", "alice")
        fields.setdefault("scope", "global")
        with self.store.transaction(write=True) as tx:
            return tx.insert_item(NewItem(body=body, **fields))

    def items(self, news: Sequence[NewItem]) -> list[ItemRow]:
        """Many items in one transaction."""
        with self.store.transaction(write=True) as tx:
            return [tx.insert_item(new) for new in news]

    def project(
        self, name: str, owner: str = "alice", members: Mapping[str, ProjectRole] | None = None
    ) -> int:
        """A project of `owner` (its owner member) with further `members`; returns its id."""
        with self.store.transaction(write=True) as tx:
            project_id = tx.insert_project(name, None, {}, owner).id
            for principal, role in (members or {}).items():
                tx.set_member(project_id, principal, role)
        return project_id

    def session(self, session_id: str, principal: str = "alice", project_id: int | None = None) -> SessionRow:
        with self.store.transaction(write=True) as tx:
            return tx.create_session(session_id, principal, None, project_id)

    def item_ids(self, viewer: Viewer, limit: int = 10_000) -> list[int]:
        """Ids of every item `viewer` may read, in id order."""
        with self.store.transaction(write=False) as tx:
            return [row.id for row in tx.query_items(viewer, ItemQuery(limit=limit))]
