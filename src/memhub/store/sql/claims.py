"""Claims on items being embedded (`vector_claims`, SQLite migration 0005, PostgreSQL 0002),
shared by the SQL backends: several processes serving one store each run a vector backfill
(search/backfill.py), and a claim makes each missing vector computed by one of them.

A claim is a lease held by `owner` until `until` (seconds since the epoch): released in the
transaction that stores the vectors it was for, taken over by anyone once it has run out (its
process died). Claims are made in write transactions, which run one at a time on every
backend (SQLite's writer lock, PostgreSQL's writer advisory lock), so two processes never
both win one item.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from memhub.store.sql.dialect import Dialect

CHUNK = 500


class ClaimsMixin:
    conn: Any
    dialect: ClassVar[Dialect]

    def claim_vectors(
        self, embedder: str, ids: Sequence[int], owner: str, *, now: float, lease_s: float
    ) -> list[int]:
        """The ids among `ids` that `owner` holds now (newly claimed, or its own claim renewed),
        in their order; the others are held by another owner whose lease has not run out."""
        p = self.dialect.param
        self.conn.execute(f"DELETE FROM vector_claims WHERE until < {p}", (now,))
        taken: set[int] = set()
        for start in range(0, len(ids), CHUNK):
            chunk = list(ids[start : start + CHUNK])
            rows = self.conn.execute(
                f"SELECT item_id FROM vector_claims WHERE embedder = {p} AND owner <> {p}"
                f" AND item_id IN ({self.dialect.placeholders(chunk)})",
                (embedder, owner, *chunk),
            ).fetchall()
            taken.update(int(r["item_id"]) for r in rows)
        mine = [i for i in dict.fromkeys(ids) if i not in taken]
        if mine:
            self.conn.cursor().executemany(
                f"INSERT INTO vector_claims(item_id, embedder, owner, until) VALUES ({p}, {p}, {p}, {p})"
                " ON CONFLICT (item_id, embedder)"
                " DO UPDATE SET owner = excluded.owner, until = excluded.until",
                [(i, embedder, owner, now + lease_s) for i in mine],
            )
        return mine

    def release_claims(self, embedder: str, ids: Sequence[int]) -> None:
        """Drop the claims on `ids` (their vectors are stored, or given up on)."""
        p = self.dialect.param
        for start in range(0, len(ids), CHUNK):
            chunk = list(ids[start : start + CHUNK])
            among = self.dialect.placeholders(chunk)
            self.conn.execute(
                f"DELETE FROM vector_claims WHERE embedder = {p} AND item_id IN ({among})",
                (embedder, *chunk),
            )
