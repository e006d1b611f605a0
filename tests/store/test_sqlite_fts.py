"""The SQLite backend's FTS5 query builder: user text never becomes query syntax."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memhub.core.text import index_text
from memhub.store.base import Store
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


def _work(tx: object, kinds: tuple[str, ...], terms: list[str]) -> tuple[list[int], int]:
    """The hits of a keyword search and the SQLite VM steps (in thousands) it took."""
    from memhub.core.models import Viewer

    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = tx.conn  # type: ignore[attr-defined]
    conn.set_progress_handler(count, 1000)
    try:
        hits = tx.text_search(Viewer("alice", "2026-01-01T00:00:00Z"), terms, kinds, None, 10)  # type: ignore[attr-defined]
    finally:
        conn.set_progress_handler(None, 0)
    return [item_id for item_id, _ in hits], steps


def test_a_rare_kind_is_ranked_on_its_own_rows(tmp_path: Path) -> None:
    """Claims among 2,000 memories that outrank them: the search ranks the claims' rows
    instead of widening through every memory's (it cost ~85 ms per toolset at 100k memories),
    and finds the same hits."""
    from memhub.core.text import search_terms
    from memhub.store.base import NewItem
    from memhub.store.open import open_store

    store = open_store(tmp_path / "fts.db")
    with store.transaction(write=True) as tx:
        for n in range(2000):
            tx.insert_item(
                NewItem(kind="memory", owner="alice", scope="global", body=f"deploy pipeline deploy {n}")
            )
        claims = [
            tx.insert_item(
                NewItem(kind="claim", owner="alice", scope="global", body=f"deploy claim {n} " + "word " * n)
            ).id
            for n in range(3)
        ]
    terms = search_terms("deploy pipeline")
    with store.transaction(write=False) as tx:
        found, steps = _work(tx, ("claim",), terms)
        _, memory_steps = _work(tx, ("memory",), terms)
    store.close()
    assert found == claims  # shortest first: BM25 favours the shorter claim
    assert steps <= 3 * memory_steps + 5, (steps, memory_steps)


def _budget_store(tmp_path: Path, bodies: list[tuple[str, str]]) -> tuple[Store, list[int]]:
    from memhub.store.base import NewItem
    from memhub.store.open import open_store

    store = open_store(f"sqlite:///{tmp_path}/budget.db")
    ids = []
    for body, kind in bodies:
        with store.transaction(write=True) as tx:
            ids.append(tx.insert_item(NewItem(kind=kind, owner="alice", scope="global", body=body)).id)
    return store, ids


def test_equal_scores_rank_the_oldest_first_within_the_budget(tmp_path: Path) -> None:
    """200 equally good matches: all of them ranked, the oldest first; over the budget, the
    newest `budget` of them, again the oldest of those first."""
    from memhub.core.models import Viewer

    store, ids = _budget_store(tmp_path, [(f"alpha note {i}", "memory") for i in range(200)])
    viewer = Viewer("alice", "2030-01-01T00:00:00Z")
    with store.transaction(write=False) as tx:
        assert [i for i, _ in tx.text_search(viewer, ["alpha"], [], None, 5, budget=3000)] == ids[:5]
        assert [i for i, _ in tx.text_search(viewer, ["alpha"], [], None, 5, budget=100)] == ids[100:105]
    store.close()


def test_a_rare_kind_is_ranked_among_the_newest_matches_of_every_kind(tmp_path: Path) -> None:
    """Over the budget, the kinds asked for are ranked among the newest matches of every kind
    (as on PostgreSQL): older claims under a flood of newer memories are not reached."""
    from memhub.core.models import Viewer

    bodies = [(f"common claim {i}", "claim") for i in range(5)]
    bodies += [(f"common memory {i}", "memory") for i in range(300)]
    bodies += [(f"common claim {i} again", "claim") for i in range(2)]
    store, ids = _budget_store(tmp_path, bodies)
    viewer = Viewer("alice", "2030-01-01T00:00:00Z")
    with store.transaction(write=False) as tx:
        hits = tx.text_search(viewer, ["common"], ["claim"], None, 10, budget=100)
        assert sorted(i for i, _ in hits) == ids[-2:]
    store.close()
