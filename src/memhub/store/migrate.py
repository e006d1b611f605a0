"""`memhub migrate`: a SQLite store copied whole into an empty PostgreSQL database, then verified.

One read snapshot of the source (store/sqlite/dump.py), one write transaction on the target
(store/postgres/load.py): every table of `TABLES` is copied row for row in that order (parents
before the rows that point at them), ids, timestamps and the audit events as they are, so the
hash chain verifies on the target; `REBUILT` tables are derived there instead (the text
index, the vector change feed), and every table is analyzed (the planner's statistics, which
PostgreSQL would otherwise take up to a minute after the commit). Then, still inside the
transaction, the verification: the row count of every table, the audit chain (it verifies,
and ends on the source's last hash), and a sample of keyword searches, each answering the same
ids on both stores. Any failure rolls the whole transaction back: the target is left as it was
(but for the row estimates ANALYZE writes in place).

A table a migration adds is copied once it is named in `TABLES` (both backends must give it
the same columns).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from memhub.core.errors import ErrorKind, MemhubError
from memhub.core.models import Boundary, Viewer
from memhub.core.text import search_terms
from memhub.store.base import EventRow, Store, Tx
from memhub.store.postgres.database import PostgresStore
from memhub.store.postgres.load import PostgresTarget, filling
from memhub.store.sqlite.database import SqliteStore
from memhub.store.sqlite.dump import SqliteSource, snapshot


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    order: str = ""  # the source's read order, when rows refer to earlier rows of the table


TABLES: tuple[Table, ...] = (
    Table("principals"),
    Table("projects"),
    Table("project_members"),
    Table("sessions"),
    Table("items", order="id"),  # an item's parent has a lower id
    Table("item_tags"),
    Table("links"),
    Table("vectors"),
    Table("events", order="id"),
    Table("pce_policies", order="id"),
    Table("pce_feedback"),
    Table("pce_active_contexts"),
)
REBUILT = ("items_fts", "vector_log")  # derived on the target, never copied
SEARCHES = 12  # keyword searches the verification compares
SEARCH_LIMIT = 200
ALL_CLASSES = frozenset(b.value for b in Boundary)

Progress = Callable[[int, int, str], None]
ChainCheck = Callable[[Iterable[EventRow]], list[str]]  # the audit chain's problems (audit/chain.py)


@dataclass
class Outcome:
    copied: dict[str, int] = field(default_factory=dict)  # rows per table
    events: int = 0
    searches: int = 0
    decrypted: bool = False


def migrate(
    source: Store,
    target: Store,
    *,
    check_chain: ChainCheck,
    replace: bool = False,
    progress: Progress | None = None,
    audit: Callable[[Tx, Outcome], object] | None = None,
) -> Outcome:
    """Copy `source` (SQLite) into `target` (PostgreSQL) and verify the copy, all or nothing
    (`check_chain`: the audit layer's verification, given the target's events);
    `audit(tx, outcome)` then runs in the target's transaction (its event follows the copied
    chain).
    Raises MemhubError (INVALID: what the user must change; STORAGE: the copy failed or did
    not verify); the target is then unchanged."""
    if not isinstance(source, SqliteStore):
        raise MemhubError(ErrorKind.INVALID, "the source must be a SQLite store (a path or sqlite:///path)")
    if not isinstance(target, PostgresStore):
        raise MemhubError(ErrorKind.INVALID, "the target must be a PostgreSQL database (postgresql://…)")
    report = progress or (lambda done, total, message: None)
    with snapshot(source) as src, filling(target) as dst:
        occupied = dst.occupied([t.name for t in TABLES] + list(REBUILT))
        if occupied and not replace:
            raise MemhubError(
                ErrorKind.INVALID,
                f"the target database is not empty ({', '.join(occupied)} hold rows): migrate into a new"
                " database, or pass --replace to empty it first (its data is lost)",
            )
        if occupied:
            dst.clear([t.name for t in TABLES] + list(REBUILT))
        outcome = Outcome(decrypted=src.encrypted)
        counts = {t.name: src.count(t.name) for t in TABLES}
        total, done = sum(counts.values()), 0
        for table in TABLES:
            for columns, rows in src.batches(table.name, table.order):
                dst.write(table.name, columns, rows)
                done += len(rows)
                report(done, total, table.name)
            dst.advance_ids(table.name, src.id_floor(table.name))
            outcome.copied[table.name] = counts[table.name]
        report(done, total, "text index")
        dst.tx.reindex_text()
        # every table's statistics (reindex_text took the keyword index's): the verification's
        # plans use them too
        dst.analyze([t.name for t in TABLES] + [name for name in REBUILT if name != "items_fts"])
        report(done, total, "verifying")
        outcome.events, outcome.searches = _verify(src, dst, counts, check_chain)
        if audit is not None:
            audit(dst.tx, outcome)
    return outcome


def _verify(
    src: SqliteSource, dst: PostgresTarget, counts: dict[str, int], check_chain: ChainCheck
) -> tuple[int, int]:
    """Raise MemhubError(STORAGE) naming the first difference (the caller rolls back)."""
    found = {name: dst.count(name) for name in counts}
    differ = [f"{name} {n} -> {found[name]}" for name, n in counts.items() if found[name] != n]
    if differ:
        raise _unverified(f"row counts differ: {', '.join(differ)}")
    if (indexed := dst.count("items_fts")) != counts["items"]:
        raise _unverified(f"the text index holds {indexed} rows for {counts['items']} items")
    problems = check_chain(dst.events())
    if problems:
        raise _unverified(f"the audit chain does not verify on the target: {problems[0]}")
    if src.last_hash() != dst.last_hash():
        raise _unverified("the audit chain on the target does not end on the source's last event")
    return counts["events"], _compare_searches(src, dst)


def _compare_searches(src: SqliteSource, dst: PostgresTarget) -> int:
    """Keyword searches for a word of items spread over the store, through each item owner's
    eyes (every boundary class, every session of theirs): both stores must find the same ids
    (the same number, for a word that matches more than `SEARCH_LIMIT` items: BM25 and
    ts_rank order them differently)."""
    done, now = 0, src.tx.now
    for owner, text in src.samples(SEARCHES):
        terms = sorted(search_terms(text), key=len, reverse=True)[:1]  # the longest: the rarest, likely
        if not terms:
            continue
        viewer = Viewer(principal=owner, now=now, sessions="own", boundaries=ALL_CLASSES)
        before = {i for i, _ in src.tx.text_search(viewer, terms, (), None, SEARCH_LIMIT)}
        after = {i for i, _ in dst.tx.text_search(viewer, terms, (), None, SEARCH_LIMIT)}
        if SEARCH_LIMIT in (len(before), len(after)):  # more matches than a page: the backends
            before, after = {len(before)}, {len(after)}  # rank alike, not equally: compare counts
        if before != after:
            raise _unverified(
                f"a keyword search of {owner} finds {len(before)} items on the source,"
                f" {len(after)} on the target"
            )
        done += 1
    return done


def _unverified(what: str) -> MemhubError:
    return MemhubError(ErrorKind.STORAGE, f"the copy did not verify ({what}); nothing was written")
