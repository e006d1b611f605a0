"""store/sql: the one visibility filter and `where` builder, rendered for each dialect. The
SQLite rendering is what the contract tests run; the PostgreSQL one must bind every value
with a placeholder (a list of ids as one array) and use none of SQLite's functions or planner
hints."""

from __future__ import annotations

from memhub.core.models import Viewer
from memhub.store.rows import ItemQuery
from memhub.store.sql import POSTGRESQL, SQLITE, item_where, visible

EVERYTHING = ItemQuery(
    kinds=["memory", "claim"],
    project_id=1,
    min_id=2,
    contains=["retry"],
    with_child_kind="decision",
    scopes=["user", "project"],
    ids=[5, 6],
    tags_any=["a", "b"],
    tags_all=["c"],
    session_id="s",
    importance_min=0.1,
    scope_projects=[1, 2],
    content_hash="h",
)
VIEWER = Viewer(principal="alice", now="2030-01-01T00:00:00Z", session_id="s", sessions="current")


def test_every_value_is_bound_in_both_dialects() -> None:
    for dialect, encrypted in ((SQLITE, False), (SQLITE, True), (POSTGRESQL, False)):
        sql, args = item_where(VIEWER, EVERYTHING, dialect, encrypted=encrypted, tag_rows=lambda tags: 10**6)
        assert sql.count(dialect.param) == len(args), dialect.name
        assert "alice" not in sql and "retry" not in sql  # values never reach the SQL text


def test_the_postgresql_rendering_has_no_sqlite_syntax() -> None:
    sql, _ = item_where(VIEWER, EVERYTHING, POSTGRESQL, tag_rows=lambda tags: 10**6)
    assert "?" not in sql and "instr(" not in sql and "+i." not in sql and "strpos(i.norm_text, %s)" in sql
    sqlite_sql, _ = item_where(VIEWER, EVERYTHING, SQLITE, encrypted=True, tag_rows=lambda tags: 10**6)
    assert (
        "+i.kind IN" in sqlite_sql
        and "+i.id IN" in sqlite_sql
        and "instr(mh_plain(i.norm_text), ?)" in sqlite_sql
    )


def test_no_boundary_class_sees_nothing_in_either_dialect() -> None:
    closed = Viewer(principal="alice", now="2030-01-01T00:00:00Z", boundaries=frozenset())
    assert visible(closed, "i", SQLITE) == ("0", [])
    assert visible(closed, "i", POSTGRESQL) == ("FALSE", [])


def test_a_list_of_ids_is_one_array_on_postgresql_and_a_placeholder_each_on_sqlite() -> None:
    assert SQLITE.among("i.id", [5, 6, 7]) == ("i.id IN (?, ?, ?)", [5, 6, 7])
    assert POSTGRESQL.among("i.id", [5, 6, 7]) == ("i.id = ANY(%s::bigint[])", [[5, 6, 7]])
    for dialect in (SQLITE, POSTGRESQL):  # no id: no row, and nothing to bind
        assert dialect.among("i.id", []) == (dialect.false, [])
