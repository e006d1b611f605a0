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
from typing import Any

from memhub.store.sql.dialect import Dialect

CHUNK = 500


class ClaimsMixin:
    conn: Any
    dialect: Dialect

    def claim_vectors(
        self, embedder: str, ids: Sequence[int], owner: str, *, now: float, lease_s: float
    ) -> tuple[list[int], list[int]]:
        """(the ids among `ids` that `owner` holds now: newly claimed, or its own claim renewed;
        those another owner holds, whose lease has not run out), each in the order given. Ids
        whose vector is stored already (by anyone, since they were read) are in neither."""
        p = self.dialect.param
        self.conn.execute(f"DELETE FROM vector_claims WHERE until < {p}", (now,))
        held: set[int] = set()
        done: set[int] = set()
        for start in range(0, len(ids), CHUNK):
            chunk = list(ids[start : start + CHUNK])
            among = self.dialect.placeholders(chunk)
            rows = self.conn.execute(
                f"SELECT item_id FROM vector_claims"
                f" WHERE embedder = {p} AND owner <> {p} AND item_id IN ({among})",
                (embedder, owner, *chunk),
            ).fetchall()
            held.update(int(r["item_id"]) for r in rows)
            rows = self.conn.execute(
                f"SELECT item_id FROM vectors WHERE embedder = {p} AND item_id IN ({among})",
                (embedder, *chunk),
            ).fetchall()
            done.update(int(r["item_id"]) for r in rows)
        wanted = list(dict.fromkeys(ids))
        mine = [i for i in wanted if i not in held and i not in done]
        if mine:
            self.conn.cursor().executemany(
                f"INSERT INTO vector_claims(item_id, embedder, owner, until) VALUES ({p}, {p}, {p}, {p})"
                " ON CONFLICT (item_id, embedder)"
                " DO UPDATE SET owner = excluded.owner, until = excluded.until",
                [(i, embedder, owner, now + lease_s) for i in mine],
            )
        return mine, [i for i in wanted if i in held and i not in done]

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

    def claim_owners(self) -> list[str]:
        """Every owner holding a claim now (to find those whose process is gone)."""
        rows = self.conn.execute("SELECT DISTINCT owner FROM vector_claims").fetchall()
        return sorted(str(r["owner"]) for r in rows)

    def drop_claims_of(self, owners: Sequence[str]) -> None:
        """Drop every claim `owners` hold (a process that stops, or one known to be dead)."""
        if owners:
            among = self.dialect.placeholders(list(owners))
            self.conn.execute(f"DELETE FROM vector_claims WHERE owner IN ({among})", tuple(owners))
