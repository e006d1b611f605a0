"""Text search through the store: CJK bigram indexing, and hostile queries that must never raise."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memhub.core import text
from memhub.core.models import Viewer
from memhub.search import SearchEngine
from memhub.store.base import Store
from memhub.store.sqlite.fts import match_query

AddItem = Callable[..., int]

HOSTILE_QUERIES = [
    '"',
    '""',
    '"unterminated',
    "*",
    "design*",
    "NEAR(a b)",
    "NEAR(",
    "a OR b",
    "OR",
    "AND",
    "NOT",
    "a AND NOT b",
    "-design",
    "- -",
    "text:design",
    ":",
    "^design",
    "^",
    "(",
    ")",
    "(design OR (plan",
    "{text}: x",
    "'; DROP TABLE items; --",
    "😀",
    "😀 設計",
    "",
    "   ",
    "\t\n",
    "x" * 10_000,
    "設計 " * 5_000,
    "\ud800",
    "a\udfffb",
    "\ud83d\ude00",
    "\x00",
    "a\x00b",
    "ｄｅｓｉｇｎ",
    "ﾌﾟﾗﾝ",
    "設",
    "々",
    "e\u0301",
    "\u200b",
    "%_",
]


def test_japanese_two_char_word_is_found(store: Store, add_item: AddItem, alice: Viewer) -> None:
    hit = add_item("API の設計方針を決めた")
    add_item("unrelated english text about lunch")
    match = text.search_terms("設計")
    assert match is not None
    with store.transaction(write=False) as tx:
        ids = [item_id for item_id, _ in tx.text_search(alice, match, (), None, 10)]
    assert ids == [hit]


def test_katakana_word_is_found(store: Store, add_item: AddItem, alice: Viewer) -> None:
    hit = add_item("今日はプランモードで作業する", title="作業メモ")
    add_item("プランを立てる")  # shares only a prefix bigram
    match = text.search_terms("プランモード")
    assert match is not None
    with store.transaction(write=False) as tx:
        ids = [item_id for item_id, _ in tx.text_search(alice, match, (), None, 10)]
    assert ids[0] == hit


def test_half_width_katakana_query_matches_full_width_text(
    store: Store, add_item: AddItem, alice: Viewer
) -> None:
    hit = add_item("プランモード")
    match = text.search_terms("ﾌﾟﾗﾝﾓｰﾄﾞ")
    assert match is not None
    with store.transaction(write=False) as tx:
        assert [i for i, _ in tx.text_search(alice, match, (), None, 10)] == [hit]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_core_text_functions_accept_any_string(query: str) -> None:
    text.normalize(query)
    text.index_text(query)
    text.query_terms(query)
    text.keyword_terms(query)
    text.search_terms(query)
    for mode in ("any", "all"):
        match_query(query, mode=mode)  # type: ignore[arg-type]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_queries_never_raise_in_fts(
    store: Store, add_item: AddItem, alice: Viewer, query: str
) -> None:
    add_item('design "plan" NEAR(x) OR AND * - : ^ ( ) 設計 プランモード 😀')
    for drop_stopwords in (True, False):
        terms = text.search_terms(query, drop_stopwords=drop_stopwords)
        with store.transaction(write=False) as tx:
            tx.text_search(alice, terms, (), None, 10)


@pytest.mark.anyio
async def test_hostile_queries_never_raise_in_engine(store: Store, add_item: AddItem, alice: Viewer) -> None:
    add_item("design plan 設計 プランモード")
    engine = SearchEngine(store, None, None)
    for query in HOSTILE_QUERIES:
        await engine.search(alice, query)


@pytest.mark.anyio
async def test_operators_in_query_are_plain_words(store: Store, add_item: AddItem, alice: Viewer) -> None:
    hit = add_item("we chose the OR mapper")
    add_item("nothing relevant here")
    engine = SearchEngine(store, None, None)
    assert [h.item_id for h in await engine.search(alice, "mapper OR")] == [hit]
    assert [h.item_id for h in await engine.search(alice, '"mapper')] == [hit]
    assert [h.item_id for h in await engine.search(alice, "mapp*")] == []  # no prefix operator


def test_text_search_cost_is_bounded_by_dropping_common_terms_then_older_rows(
    store: Store, add_item: AddItem, alice: Viewer
) -> None:
    common = [add_item(f"deploy note number {i}") for i in range(20)]
    rare = [add_item(f"deploy rollback drill {i}") for i in range(3)]
    terms = text.search_terms("deploy rollback")
    with store.transaction(write=False) as tx:
        unbounded = [i for i, _ in tx.text_search(alice, terms, (), None, 50)]
        assert set(unbounded) == {*common, *rare} and set(unbounded[:3]) == set(rare)
        # 23 rows match; with a budget of 5 the frequent "deploy" is dropped: "rollback" ranks alone
        assert sorted(i for i, _ in tx.text_search(alice, terms, (), None, 3, budget=5)) == rare
        # asked for more than the rare term finds: the newest 5 matches of every term join them
        newest = sorted([*common, *rare])[-5:]
        assert sorted(i for i, _ in tx.text_search(alice, terms, (), None, 50, budget=5)) == newest
        # one term matching more than the budget: only its newest matches are ranked
        assert sorted(
            i for i, _ in tx.text_search(alice, text.search_terms("deploy"), (), None, 50, budget=5)
        ) == (newest)


def test_when_the_rare_terms_are_invisible_the_common_ones_still_answer(
    store: Store, add_item: AddItem, alice: Viewer
) -> None:
    common = [add_item(f"deploy note number {i}") for i in range(20)]
    for i in range(3):
        add_item(f"deploy rollback drill {i}", owner="bob", scope="user")  # alice cannot see these
    with store.transaction(write=False) as tx:
        hits = tx.text_search(alice, text.search_terms("deploy rollback"), (), None, 3, budget=5)
    assert {i for i, _ in hits} == set(common[-2:])  # of the 5 newest matches, 2 are hers


def test_text_search_widens_past_rows_the_viewer_cannot_see(
    store: Store, add_item: AddItem, alice: Viewer
) -> None:
    for i in range(300):  # the best matches (short rows, the term twice) are bob's
        add_item("kanban kanban", owner="bob", scope="user", title=f"b{i}")
    mine = [add_item(f"a long note that mentions kanban once among many other words {i}") for i in range(3)]
    with store.transaction(write=False) as tx:
        assert sorted(i for i, _ in tx.text_search(alice, text.search_terms("kanban"), (), None, 3)) == mine


@pytest.mark.anyio
async def test_keyword_search_alone_finds_japanese_content_words(
    store: Store, add_item: AddItem, alice: Viewer
) -> None:
    hit = add_item("本番データベースの移行は週末に行う")
    add_item("週末の予定")
    engine = SearchEngine(store, None, None)  # no vectors: the keyword side cuts the query
    assert [h.item_id for h in await engine.search(alice, "データベース移行の進め方")] == [hit]


def test_hits_hidden_by_boundary_are_counted_in_the_one_query(
    store: Store, add_item: AddItem, alice: Viewer
) -> None:
    """The explanation's count of keyword hits a boundary class hid comes from the rows the
    search ranked (no second search): secret rows ranked above the last hit are counted, a
    secret row of another kind or one that does not match is not, and the hits are unchanged."""
    from dataclasses import replace

    from memhub.store.base import NewItem

    shown = [add_item(f"deploy pipeline note {n}") for n in range(3)]
    with store.transaction(write=True) as tx:
        for body, kind in (
            ("deploy deploy pipeline pipeline secret", "memory"),
            ("deploy pipeline deploy secret runbook", "memory"),
            ("deploy pipeline deploy pipeline claim", "claim"),
            ("lunch menu secret", "memory"),
        ):
            tx.insert_item(
                NewItem(kind=kind, owner="alice", scope="global", body=body, boundary_class="secret")
            )
    every = replace(alice, boundaries=frozenset({"public", "internal", "pii", "secret"}))
    terms = text.search_terms("deploy pipeline")
    with store.transaction(write=False) as tx:
        plain = tx.text_search(alice, terms, ("memory",), None, 10)
        hits, hidden = tx.text_search_hidden(alice, every, terms, ("memory",), None, 10)
        few, hidden_above = tx.text_search_hidden(alice, every, terms, ("memory",), None, 1)
        none_hidden = tx.text_search_hidden(alice, alice, terms, ("memory",), None, 10)[1]
    assert hits == plain and sorted(i for i, _ in hits) == shown
    assert hidden == 2 and none_hidden == 0
    assert len(few) == 1 and hidden_above == 2  # both secret rows outrank the best visible hit
