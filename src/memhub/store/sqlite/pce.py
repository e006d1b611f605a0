"""The pce toolset's tables on SQLite: the SQL is store/sql/pce.py; here, an active context
(it holds claim text) is encrypted like items when the store is."""

from __future__ import annotations

import sqlite3

from memhub.store.crypto import ContentCipher
from memhub.store.sql.pce import PceMixin as SqlPce


class PceMixin(SqlPce):
    conn: sqlite3.Connection
    cipher: ContentCipher | None

    def _seal_context(self, text: str) -> str:
        sealed = self.cipher.encrypt(text, "active_context") if self.cipher is not None else text
        return sealed or ""

    def _open_context(self, stored: str) -> str:
        if self.cipher is None:
            return stored
        return self.cipher.decrypt(stored, "active_context") or ""
