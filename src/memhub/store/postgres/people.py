"""Principals, projects, memberships and sessions on PostgreSQL: the SQL is store/sql/people.py;
here, the lock that lets one replica at a time create a principal (the first one is the
store's admin)."""

from __future__ import annotations

from psycopg import Connection
from psycopg.rows import DictRow

from memhub.store.sql.people import PeopleMixin as SqlPeople

ADMIN_LOCK = 0x6D656D6875620003  # the first principal is the admin: one creator at a time


class PeopleMixin(SqlPeople):
    conn: Connection[DictRow]

    def _first_principal_lock(self) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADMIN_LOCK,))
