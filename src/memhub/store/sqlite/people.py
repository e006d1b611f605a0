"""Principals, projects, memberships and sessions on SQLite: the SQL is store/sql/people.py;
here, project names, descriptions and attributes and session names are sealed with the
store's cipher (store/sqlite/sealing.py), and a project is looked up by its name's
deterministic ciphertext."""

from __future__ import annotations

import sqlite3

from memhub.store.crypto import ContentCipher
from memhub.store.sql import SQLITE
from memhub.store.sql.people import PeopleMixin as SqlPeople
from memhub.store.sqlite.sealing import seal, unseal

placeholders = SQLITE.placeholders  # "?, ?, …" for as many values


class PeopleMixin(SqlPeople):
    conn: sqlite3.Connection
    cipher: ContentCipher | None

    def _seal_column(self, text: str | None, aad: str) -> str | None:
        return seal(self.cipher, text, aad)

    def _unseal_column(self, value: str | None, aad: str) -> str | None:
        return unseal(self.cipher, value, aad)
