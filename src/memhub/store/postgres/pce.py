"""The pce toolset's tables on PostgreSQL: policy versions, feedback signals, active contexts."""

from __future__ import annotations

import json

from psycopg import Connection
from psycopg.rows import DictRow

from memhub.core.errors import conflict
from memhub.store.rows import ActiveContextRow, PolicyRow
from memhub.store.sql.rowmap import policy_from_row


class PceMixin:
    conn: Connection[DictRow]
    now: str

    def insert_policy(self, row: PolicyRow) -> None:
        inserted = self.conn.execute(
            "INSERT INTO pce_policies(version, yaml, doc, author, approver, signed, diff, applied_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (version) DO NOTHING",
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
        row = self.conn.execute("SELECT * FROM pce_policies ORDER BY id DESC LIMIT 1").fetchone()
        return policy_from_row(row) if row else None

    def policy_versions(self) -> list[str]:
        return [r["version"] for r in self.conn.execute("SELECT version FROM pce_policies ORDER BY id")]

    def get_policy(self, version: str) -> PolicyRow | None:
        row = self.conn.execute("SELECT * FROM pce_policies WHERE version = %s", (version,)).fetchone()
        return policy_from_row(row) if row else None

    def add_feedback(
        self, claim_id: int, principal: str, ts_bucket: int, signal: str, score: float | None
    ) -> bool:
        return (
            self.conn.execute(
                "INSERT INTO pce_feedback(claim_id, principal, ts_bucket, signal, score, at)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (claim_id, principal, ts_bucket, signal, score, self.now),
            ).rowcount
            == 1
        )

    def insert_active_context(self, row: ActiveContextRow, purge_before: str) -> None:
        self.conn.execute("DELETE FROM pce_active_contexts WHERE expires_at < %s", (purge_before,))
        self.conn.execute(
            "INSERT INTO pce_active_contexts(id, owner, body, created_at, expires_at)"
            " VALUES (%s, %s, %s, %s, %s)",
            (row.id, row.owner, json.dumps(row.body, ensure_ascii=False), row.created_at, row.expires_at),
        )

    def get_active_context(self, context_id: str) -> ActiveContextRow | None:
        row = self.conn.execute("SELECT * FROM pce_active_contexts WHERE id = %s", (context_id,)).fetchone()
        if row is None:
            return None
        return ActiveContextRow(
            row["id"], row["owner"], json.loads(row["body"]), row["created_at"], row["expires_at"]
        )
