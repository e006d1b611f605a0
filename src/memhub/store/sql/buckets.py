"""Rate-limit token buckets kept in a database, so that every process serving one store spends
from the same buckets (services/ratelimit.py holds the arithmetic; this is its SQL).

One row per (key, class): the tokens left at time `at` (seconds since the epoch). `take` is
one atomic upsert: a missing row starts full and spends one token; an existing row is
refilled by the time since `at` (at `rate` tokens a second, up to `cap`), then spends one
token when a whole one is there; `granted` says which it was. Both backends evaluate a SET
list against the row as it was, and serialise concurrent upserts of one row (PostgreSQL: its
row lock; SQLite: the file's writer lock), so no call is counted twice or lost.
"""

from __future__ import annotations

from memhub.store.sql.dialect import Dialect

CREATE = (
    "CREATE TABLE IF NOT EXISTS rate_buckets (key TEXT NOT NULL, class TEXT NOT NULL,"
    " tokens REAL NOT NULL, at REAL NOT NULL, cap REAL NOT NULL, rate REAL NOT NULL,"
    " granted INTEGER NOT NULL, PRIMARY KEY (key, class))"
)


def take_sql(dialect: Dialect) -> str:
    """Parameters: key, class, tokens left when the row is new (cap - 1), now, cap, rate."""
    p = dialect.param
    elapsed = "(CASE WHEN excluded.at > b.at THEN excluded.at - b.at ELSE 0 END)"
    refill = (
        f"(CASE WHEN b.tokens + {elapsed} * excluded.rate > excluded.cap THEN excluded.cap"
        f" ELSE b.tokens + {elapsed} * excluded.rate END)"
    )
    return (
        "INSERT INTO rate_buckets AS b (key, class, tokens, at, cap, rate, granted)"
        f" VALUES ({p}, {p}, {p}, {p}, {p}, {p}, 1)"
        " ON CONFLICT (key, class) DO UPDATE SET"
        f" tokens = CASE WHEN {refill} >= 1 THEN {refill} - 1 ELSE {refill} END,"
        f" granted = CASE WHEN {refill} >= 1 THEN 1 ELSE 0 END,"
        " at = CASE WHEN excluded.at > b.at THEN excluded.at ELSE b.at END,"
        " cap = excluded.cap, rate = excluded.rate"
        " RETURNING tokens, granted"
    )


def peek_sql(dialect: Dialect) -> str:
    p = dialect.param
    return f"SELECT tokens, at FROM rate_buckets WHERE key = {p} AND class = {p}"


def purge_sql(dialect: Dialect) -> str:
    """Rows older than the parameter: full again by then, and a missing row starts full."""
    return f"DELETE FROM rate_buckets WHERE at < {dialect.param}"
