"""The audit log in SQL, for every SQL backend: appending to the hash chain and keyset pages of
it (store/sql/events.py). A backend whose writers are not serialised by the database itself
holds `_chain_lock` before it reads the chain's head (PostgreSQL: an advisory lock)."""

from __future__ import annotations

import json
from typing import Any

from memhub.core.hashing import GENESIS_HASH, event_hash
from memhub.store.base import EventRow
from memhub.store.sql.conn import Connection
from memhub.store.sql.dialect import Dialect
from memhub.store.sql.events import events_page, events_page_queries


class AuditMixin:
    conn: Connection
    now: str
    write: bool
    dialect: Dialect

    def _chain_lock(self) -> None:
        """Held from reading the chain's head to the commit (SQLite: the write transaction is)."""
        return None

    def append_event(
        self, principal: str, tool: str, outcome: str, detail: dict[str, Any], at: str | None = None
    ) -> EventRow:
        """Append to the hash chain, in a write transaction, under `_chain_lock`: the chain
        stays linear even when several processes write."""
        if not self.write:
            raise ValueError("audit events are appended in write transactions only")
        self._chain_lock()
        when = at or self.now
        last = self.conn.execute("SELECT hash FROM events ORDER BY id DESC LIMIT 1").fetchone()
        prev = last["hash"] if last else GENESIS_HASH
        digest = event_hash(prev, when, principal, tool, outcome, detail)
        p = self.dialect.param
        row = self.conn.execute(
            "INSERT INTO events(at, principal, tool, outcome, detail, prev_hash, hash)"
            f" VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}) RETURNING id",
            (when, principal, tool, outcome, json.dumps(detail, ensure_ascii=False), prev, digest),
        ).fetchone()
        return EventRow(int(row["id"]), when, principal, tool, outcome, detail, prev, digest)

    def events_page(
        self,
        *,
        before: int | None,
        limit: int,
        scan: int,
        principal: str = "",
        tool_prefix: str = "",
        outcome: str = "",
        mentions: str = "",
    ) -> tuple[list[EventRow], int | None]:
        """Keyset paging backwards on the primary key (store/sql/events.py)."""
        (window, window_args), (page, page_args) = events_page_queries(
            self.dialect, before=before, limit=limit, scan=scan, principal=principal,
            tool_prefix=tool_prefix, outcome=outcome, mentions=mentions,
        )  # fmt: skip
        scanned = self.conn.execute(window, window_args).fetchone()
        rows = self.conn.execute(page, page_args).fetchall()
        lowest, count = (scanned["lowest"], int(scanned["n"])) if scanned is not None else (None, 0)
        return events_page(rows, lowest, count, limit, scan)
