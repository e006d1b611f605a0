"""The pce toolset's tables in SQL, for every SQL backend: policy versions, feedback signals,
active contexts. A backend that encrypts (SQLite) seals an active context (it holds claim
text) through `_seal_context`/`_open_context`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memhub.core.errors import conflict
from memhub.store.rows import ActiveContextRow, PolicyRow
from memhub.store.sql.conn import Connection, Cursor
from memhub.store.sql.dialect import Dialect
from memhub.store.sql.rowmap import policy_from_row


class PceMixin:
    conn: Connection
    now: str
    dialect: Dialect

    def _seal_context(self, text: str) -> str:
        """An active context's JSON as stored."""
        return text

    def _open_context(self, stored: str) -> str:
        return stored

    def _pce(self, sql: str, args: Sequence[Any] = ()) -> Cursor:
        """One statement written with `?` placeholders, in this backend's dialect."""
        return self.conn.execute(sql.replace("?", self.dialect.param), args)

    def insert_policy(self, row: PolicyRow) -> None:
        inserted = self._pce(
            "INSERT INTO pce_policies(version, yaml, doc, author, approver, signed, diff, applied_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (version) DO NOTHING",
            (
                row.version,
                row.yaml,
                json.dumps(row.doc, ensure_ascii=False),
                row.author,
                row.approver,
                int(row.signed),
                json.dumps(row.diff, ensure_ascii=False),
                row.applied_at,
            ),
        ).rowcount
        if not inserted:
            raise conflict(f"policy version {row.version} already exists", reason="version_reused")

    def current_policy(self) -> PolicyRow | None:
        row = self._pce("SELECT * FROM pce_policies ORDER BY id DESC LIMIT 1").fetchone()
        return policy_from_row(row) if row else None

    def policy_versions(self) -> list[str]:
        return [r["version"] for r in self._pce("SELECT version FROM pce_policies ORDER BY id").fetchall()]

    def get_policy(self, version: str) -> PolicyRow | None:
        row = self._pce("SELECT * FROM pce_policies WHERE version = ?", (version,)).fetchone()
        return policy_from_row(row) if row else None

    def add_feedback(
        self, claim_id: int, principal: str, ts_bucket: int, signal: str, score: float | None
    ) -> bool:
        """Whether the signal was new (one per claim, principal, time bucket and signal)."""
        added = self._pce(
            "INSERT INTO pce_feedback(claim_id, principal, ts_bucket, signal, score, at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (claim_id, principal, ts_bucket, signal, score, self.now),
        )
        return added.rowcount == 1

    def insert_active_context(self, row: ActiveContextRow, purge_before: str) -> None:
        self._pce("DELETE FROM pce_active_contexts WHERE expires_at < ?", (purge_before,))
        self._pce(
            "INSERT INTO pce_active_contexts(id, owner, body, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            (row.id, row.owner, self._seal_context(json.dumps(row.body, ensure_ascii=False)), row.created_at,
             row.expires_at),
        )  # fmt: skip

    def get_active_context(self, context_id: str) -> ActiveContextRow | None:
        row = self._pce("SELECT * FROM pce_active_contexts WHERE id = ?", (context_id,)).fetchone()
        if row is None:
            return None
        body = json.loads(self._open_context(row["body"]))
        return ActiveContextRow(row["id"], row["owner"], body, row["created_at"], row["expires_at"])
