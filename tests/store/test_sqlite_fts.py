"""The SQLite backend's FTS5 query builder: user text never becomes query syntax."""

from __future__ import annotations

import sqlite3

import pytest

from memhub.core.text import index_text
from memhub.store.sqlite.fts import match_query
from tests.core.test_text import NASTY


@pytest.mark.parametrize("query", NASTY)
def test_match_query_never_raises_in_sqlite(query: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO t(text) VALUES (?)", (index_text("設計 plan mode running"),))
    for mode in ("any", "all"):
        expr = match_query(query, mode=mode)  # type: ignore[arg-type]
        if expr is not None:
            conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()


def test_match_query_finds_stemmed_and_cjk_terms() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute(
        "INSERT INTO t(rowid, text) VALUES (1, ?)", (index_text("設計議論フェーズではプランモード不要"),)
    )
    conn.execute("INSERT INTO t(rowid, text) VALUES (2, ?)", (index_text("The runners were running fast"),))
    for query, expected in [
        ("設計", [1]),
        ("プランモード", [1]),
        ("run", [2]),
        ("the run", [2]),
        ("設", [1]),
    ]:
        expr = match_query(query)
        assert expr is not None
        assert [r[0] for r in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,))] == expected, query
    assert match_query("the of and") is not None  # all stopwords: kept rather than empty
    assert match_query("!!! ???") is None
