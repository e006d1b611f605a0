"""The pce toolset's tables in SQLite: policy versions, feedback signals, active contexts."""

from __future__ import annotations

import json
import sqlite3

from memhub.core.errors import conflict
from memhub.store.crypto import ContentCipher
from memhub.store.rows import ActiveContextRow, PolicyRow
from memhub.store.sql.rowmap import policy_from_row


class PceMixin:
    conn: sqlite3.Connection
    now: str
    cipher: ContentCipher | None  # an active context holds claim text: encrypted like items

    def insert_policy(self, row: PolicyRow) -> None:
        try:
            self.conn.execute(
                "INSERT INTO pce_policies(version, yaml, doc, author, approver, signed, diff, applied_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
            )
        except sqlite3.IntegrityError:
            raise conflict(f"policy version {row.version} already exists", reason="version_reused") from None

    def current_policy(self) -> PolicyRow | None:
        row = self.conn.execute("SELECT * FROM pce_policies ORDER BY id DESC LIMIT 1").fetchone()
        return policy_from_row(row) if row else None

    def policy_versions(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT version FROM pce_policies ORDER BY id")]

    def get_policy(self, version: str) -> PolicyRow | None:
        row = self.conn.execute("SELECT * FROM pce_policies WHERE version = ?", (version,)).fetchone()
        return policy_from_row(row) if row else None

    def add_feedback(
        self, claim_id: int, principal: str, ts_bucket: int, signal: str, score: float | None
    ) -> bool:
        return (
            self.conn.execute(
                "INSERT OR IGNORE INTO pce_feedback(claim_id, principal, ts_bucket, signal, score, at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (claim_id, principal, ts_bucket, signal, score, self.now),
            ).rowcount
            == 1
        )

    def insert_active_context(self, row: ActiveContextRow, purge_before: str) -> None:
        self.conn.execute("DELETE FROM pce_active_contexts WHERE expires_at < ?", (purge_before,))
        self.conn.execute(
            "INSERT INTO pce_active_contexts(id, owner, body, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            (row.id, row.owner, self._seal_context(row.body), row.created_at, row.expires_at),
        )

    def _seal_context(self, body: object) -> str:
        text = json.dumps(body, ensure_ascii=False)
        sealed = self.cipher.encrypt(text, "active_context") if self.cipher is not None else text
        return sealed or ""

    def _open_context(self, stored: str) -> str:
        if self.cipher is None:
            return stored
        return self.cipher.decrypt(stored, "active_context") or ""

    def get_active_context(self, context_id: str) -> ActiveContextRow | None:
        row = self.conn.execute("SELECT * FROM pce_active_contexts WHERE id = ?", (context_id,)).fetchone()
        if row is None:
            return None
        return ActiveContextRow(
            row["id"],
            row["owner"],
            json.loads(self._open_context(row["body"])),
            row["created_at"],
            row["expires_at"],
        )
