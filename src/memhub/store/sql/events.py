"""Keyset pages of the audit log (`AuditTx.events_page`), shared by the SQL backends: the two
queries and the page made of their rows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memhub.store.base import EventRow
from memhub.store.sql.dialect import Dialect

Query = tuple[str, list[Any]]
NEWEST = 2**63 - 1  # `before` when none is given: past every event id


def events_page_queries(
    dialect: Dialect,
    *,
    before: int | None,
    limit: int,
    scan: int,
    principal: str = "",
    tool_prefix: str = "",
    outcome: str = "",
    mentions: str = "",
) -> tuple[Query, Query]:
    """(the window's lowest id and size, the window's matching rows): the window is the `scan`
    events older than `before`, read backwards on the primary key, so one page reads at most
    `scan` events whatever the log's size; `limit + 1` rows tell whether more follow."""
    p = dialect.param
    conds: list[str] = []
    args: list[Any] = []
    for cond, value in (
        (f"principal = {p}", principal),
        (f"outcome = {p}", outcome),
        (f"substr(tool, 1, length({p})) = {p}", tool_prefix),
        (dialect.contains("detail"), json.dumps(mentions) if mentions else ""),
    ):
        if value:
            conds.append(cond)
            args.extend([value] * cond.count(p))
    start = before or NEWEST
    window = f"SELECT * FROM events WHERE id < {p} ORDER BY id DESC LIMIT {p}"
    where = " AND ".join(conds) or "1 = 1"
    return (
        (f"SELECT min(id) AS lowest, count(*) AS n FROM ({window}) w", [start, scan]),
        (
            f"SELECT * FROM ({window}) w WHERE {where} ORDER BY id DESC LIMIT {p}",
            [start, scan, *args, limit + 1],
        ),
    )


def events_page(
    rows: Sequence[Any], lowest: int | None, scanned: int, limit: int, scan: int
) -> tuple[list[EventRow], int | None]:
    """The page (newest first) and the id to continue before (None: the log's start was reached)."""
    events = [
        EventRow(r["id"], r["at"], r["principal"], r["tool"], r["outcome"], json.loads(r["detail"]),
                 r["prev_hash"], r["hash"])
        for r in rows[:limit]
    ]  # fmt: skip
    if len(rows) > limit:
        return events, events[-1].id
    more = scanned == scan and lowest is not None
    return events, int(lowest) if more and lowest is not None else None
