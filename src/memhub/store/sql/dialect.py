"""What differs between SQL backends in the statements memhub shares, and nothing else.

A `Dialect` is data plus a few tiny functions: the parameter placeholder, the literal for
"no row", a substring test, the function that reads encrypted text (SQLite registers
`mh_plain` on every connection; a backend without one cannot filter encrypted text in SQL),
and planner hints (SQLite's unary `+` keeps its planner off an index, `NOT INDEXED` holds it to
rowid lookups; PostgreSQL has no such hints, so they are no-ops there).
A list of ids is one placeholder each on SQLite and one array parameter on PostgreSQL
(`among`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Sized
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str
    param: str  # one bound parameter: "?" (sqlite3) or "%s" (psycopg)
    false: str  # a condition no row satisfies
    position_function: str  # (haystack, needle) -> 1-based position, 0 when absent
    plain_function: str | None  # decrypts a stored text column inside SQL (None: not available)
    no_index_hint: str  # prefix that keeps the planner from using an index on an expression
    by_rowid: str  # after a table alias: read the table by its primary key only ("" : no hint)
    id_array: bool  # a list of ids bound as one array parameter (PostgreSQL) or one each (SQLite)

    def placeholders(self, values: Iterable[Any]) -> str:
        """`?, ?, ?` for as many values (empty for none: the caller decides what that means)."""
        count = len(values) if isinstance(values, Sized) else sum(1 for _ in values)
        return ", ".join([self.param] * count)

    def among(self, column: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
        """`column` is one of `ids` (no row for none), and its parameters. PostgreSQL binds them
        as one array (`= ANY(%s::bigint[])`): one statement text whatever their count, so it is
        parsed and planned as one, where 400 placeholders took ~2x as long (docs/benchmarks.md,
        "the planner's statistics after a bulk write")."""
        if not ids:
            return self.false, []
        if self.id_array:
            return f"{column} = ANY({self.param}::bigint[])", [list(ids)]
        return f"{column} IN ({self.placeholders(ids)})", list(ids)

    def contains(self, column: str) -> str:
        """`column` contains the next parameter as a substring."""
        return f"{self.position_function}({column}, {self.param}) > 0"

    def plain(self, column: str, *, encrypted: bool) -> str:
        """`column` as plaintext: itself, or decrypted by the connection's function."""
        if not encrypted:
            return column
        if self.plain_function is None:
            raise ValueError(f"{self.name} cannot search encrypted text")
        return f"{self.plain_function}({column})"

    def unindexed(self, expression: str, *, when: bool = True) -> str:
        """`expression`, with the hint that keeps the planner from driving the query by its index."""
        return f"{self.no_index_hint}{expression}" if when else expression


SQLITE = Dialect(
    name="sqlite",
    param="?",
    false="0",
    position_function="instr",
    plain_function="mh_plain",
    no_index_hint="+",
    # Without statistics (the store never runs ANALYZE) SQLite drives an id-list query by the
    # `(kind, scope, ...)` index and reads the ids' whole kind: at 100k memories 400 candidates
    # took ~100 ms instead of ~2. NOT INDEXED leaves it the rowid lookups (an id list is always a
    # top-level AND condition of store/sql/where.py).
    by_rowid=" NOT INDEXED",
    id_array=False,
)

POSTGRESQL = Dialect(
    name="postgresql",
    param="%s",
    false="FALSE",
    position_function="strpos",
    plain_function=None,
    no_index_hint="",
    by_rowid="",
    id_array=True,
)
