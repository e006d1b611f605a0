"""ItemsTx.text_search: plain terms (core.text.search_terms), stemming, CJK, no query syntax,
visibility, filters, relevance order and the ranking budget."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest

from memhub.core.models import Viewer
from memhub.core.text import index_text, search_terms
from memhub.store.base import NewItem, Store
from tests.helpers import FTS_TRICKS
from tests.store.contract import Seed, viewer

ALICE = viewer("alice")
HOSTILE = [
    '"unterminated',
    "(design OR (plan",
    "{text}: x",
    "'; DROP TABLE items; --",
    "😀 設計",
    "",
    "\t\n",
    "x" * 5_000,
    "設計 " * 2_000,
    "\ud800",
    "a\x00b",
    "ｄｅｓｉｇｎ",
    "ﾌﾟﾗﾝ",
    "々",
    "e\u0301",
    "\u200b",
    "%_",
]


def found(
    store: Store, query: str, *, who: Viewer = ALICE, kinds: Sequence[str] = (), project_id: int | None = None
) -> list[int]:
    """Ids `text_search` returns for the plain terms of `query`, best first."""
    with store.transaction(write=False) as tx:
        hits = tx.text_search(who, search_terms(query), kinds, project_id, 50)
    return [item_id for item_id, _ in hits]


def test_english_stemming(store: Store, seed: Seed) -> None:
    runner = seed.item("The runners were running quickly")
    deploy = seed.item("We deployed the service twice")
    seed.item("Nothing related here")
    assert found(store, "run") == [runner.id]
    assert found(store, "runs") == [runner.id]
    assert found(store, "deploying") == [deploy.id]
    assert found(store, "Deploys") == [deploy.id]
    assert found(store, "walking") == []


def test_japanese_words_and_single_kanji_prefix(store: Store, seed: Seed) -> None:
    design = seed.item("設計議論フェーズではプランモード不要")
    policy = seed.item("方針を決めた")
    seed.item("english only")
    assert found(store, "設計") == [design.id]
    assert found(store, "プランモード") == [design.id]
    assert found(store, "方針") == [policy.id]
    assert found(store, "計画") == []  # both characters occur, never together
    assert found(store, "設") == [design.id]  # one kanji: any word starting with it
    assert sorted(found(store, "方")) == [policy.id]
    assert found(store, "ＤＥＳＩＧＮ") == []
    assert search_terms("設計") == ["設計"]


def test_operator_looking_text_is_plain(store: Store, seed: Seed) -> None:
    words = seed.item("either or neither, and not near the column value")
    other = seed.item("design notes")
    assert found(store, "OR") == [words.id]
    assert found(store, "NOT") == [words.id]
    assert found(store, "NEAR(") == [words.id]
    assert found(store, "col:val") == []  # two plain words, neither a column filter nor a prefix
    assert found(store, "-design") == [other.id]
    assert found(store, "design*") == [other.id]
    assert found(store, '"design') == [other.id]
    with store.transaction(write=False) as tx:
        assert [i for i, _ in tx.text_search(ALICE, ["or", "and", "not", "near"], (), None, 10)] == [words.id]


@pytest.mark.parametrize("query", [*FTS_TRICKS, *HOSTILE])
def test_hostile_queries_never_raise(store: Store, seed: Seed, query: str) -> None:
    seed.item("設計 plan mode running")
    with store.transaction(write=False) as tx:
        hits = tx.text_search(ALICE, search_terms(query), (), None, 10)
    assert all(score >= 0 for _, score in hits)


def test_no_terms_or_no_limit_find_nothing(store: Store, seed: Seed) -> None:
    seed.item("something")
    with store.transaction(write=False) as tx:
        assert tx.text_search(ALICE, [], (), None, 10) == []
        assert tx.text_search(ALICE, ["something"], (), None, 0) == []


def test_relevance_order(store: Store, seed: Seed) -> None:
    one = seed.item("apple pie recipe for the weekend with friends")
    both = seed.item("apple banana")
    seed.item("cherry")
    with store.transaction(write=False) as tx:
        hits = tx.text_search(ALICE, ["apple", "banana"], (), None, 10)
        limited = tx.text_search(ALICE, ["apple", "banana"], (), None, 1)
    assert [i for i, _ in hits] == [both.id, one.id]
    assert all(score >= 0 for _, score in hits)
    assert hits[0][1] >= hits[1][1]
    assert limited == hits[:1]


def test_respects_visibility_kinds_and_project(store: Store, seed: Seed) -> None:
    project = seed.project("demo")
    other = seed.project("other", owner="bob")
    mine = seed.item("zebra in the global scope")
    bobs_private = seed.item("zebra of bob", owner="bob", scope="user")
    topic = seed.item("zebra topic", kind="topic")
    in_project = seed.item("zebra project", scope="project", project_id=project)
    in_other = seed.item("zebra elsewhere", owner="bob", scope="project", project_id=other)
    secret = seed.item("zebra secret", boundary_class="secret")
    assert sorted(found(store, "zebra")) == sorted([mine.id, topic.id, in_project.id])
    assert sorted(found(store, "zebra", who=viewer("bob"))) == sorted(
        [mine.id, bobs_private.id, topic.id, in_other.id]
    )
    assert found(store, "zebra", kinds=["topic"]) == [topic.id]
    assert found(store, "zebra", project_id=project) == [in_project.id]
    assert found(store, "zebra", project_id=other) == []
    assert secret.id in found(store, "zebra", who=viewer("alice", boundaries=frozenset({"secret"})))


def test_many_invisible_matches_do_not_hide_visible_ones(store: Store, seed: Seed) -> None:
    seed.items([NewItem(kind="memory", owner="bob", scope="user", body=f"walrus {n}") for n in range(300)])
    mine = seed.item("walrus of alice")
    assert found(store, "walrus") == [mine.id]


def test_budget_bounds_the_ranked_rows(store: Store, seed: Seed) -> None:
    rows = seed.items(
        [NewItem(kind="memory", owner="alice", scope="global", body=f"common word {n}") for n in range(60)]
    )
    with store.transaction(write=False) as tx:
        unbounded = tx.text_search(ALICE, ["common"], (), None, 100)
        bounded = tx.text_search(ALICE, ["common"], (), None, 100, budget=10)
        rare = tx.text_search(ALICE, ["common", "word"], (), None, 100, budget=10)
    assert {i for i, _ in unbounded} == {r.id for r in rows}
    assert 0 < len(bounded) <= 2 * 10  # ~budget rows ranked, not all 60
    assert 0 < len(rare) <= 2 * 10


def _bm25(docs: dict[int, str], terms: dict[str, Callable[[list[str]], int]]) -> dict[int, float]:
    """FTS5's bm25() (k1 1.2, b 0.75), by hand over the indexed tokens of `docs` (all rows)."""
    tokens = {item_id: index_text(None, body, "").split() for item_id, body in docs.items()}
    avgdl = sum(len(t) for t in tokens.values()) / len(tokens)
    scores: dict[int, float] = {}
    for tf_of in terms.values():
        n = sum(1 for t in tokens.values() if tf_of(t))
        idf = max(1e-6, math.log((len(tokens) - n + 0.5) / (n + 0.5)))
        for item_id, t in tokens.items():
            if tf := tf_of(t):
                norm = 1.2 * (1 - 0.75 + 0.75 * len(t) / avgdl)
                scores[item_id] = scores.get(item_id, 0.0) + idf * tf * 2.2 / (tf + norm)
    return scores


def _runs(tokens: list[str], phrase: list[str]) -> int:
    """How often `phrase` occurs in `tokens` (overlapping instances counted)."""
    return sum(1 for i in range(len(tokens) - len(phrase) + 1) if tokens[i : i + len(phrase)] == phrase)


def test_scores_are_fts5_bm25_and_follow_writes(store: Store, seed: Seed, encrypted: bool) -> None:
    """Both backends rank by FTS5's BM25: document frequency, length against the average,
    phrase counts for CJK; the statistics follow inserts, updates and deletes."""
    if encrypted:
        pytest.skip("an encrypted store indexes keyed tokens of its own (store/crypto.py): other lengths")
    bodies = ["apple apple banana", "apple cherry date elder fig", "cherry", "設計議論の話と設計議論"]
    # a CJK phrase once where each of its bigrams is once, or more often; twice; in runs apart
    # (positions run on across the comma: held, on both backends); absent though every bigram
    # is there (the row matched by "apple"); a phrase overlapping itself (設計設計, twice in
    # 設計設計設計, one bigram repeated within it)
    bodies += ["設計議論の話", "設計議論、設計、議論と計議", "議論設計議論設計議論", "設計、計議、議論 apple"]
    bodies += ["設計、議論、計議 apple", "設計設計設計"]
    bodies += [f"filler text number {n}" for n in range(8)]
    docs = {seed.item(body).id: body for body in bodies}
    terms: dict[str, Callable[[list[str]], int]] = {
        "apple": lambda t: t.count("apple"),
        "cherry": lambda t: t.count("cherry"),
        "設計議論": lambda t: _runs(t, ["設計", "計議", "議論"]),
        "設計設計": lambda t: _runs(t, ["設計", "計設", "設計"]),
    }

    def check() -> None:
        with store.transaction(write=False) as tx:
            got = dict(tx.text_search(ALICE, list(terms), (), None, 50))
        expected = _bm25(docs, terms)
        assert got.keys() == expected.keys()
        for item_id, score in expected.items():
            assert got[item_id] == pytest.approx(score, rel=1e-6)

    check()
    first, second, third = list(docs)[:3]
    with store.transaction(write=True) as tx:
        tx.update_item(second, {"body": "apple apple apple"})
        tx.delete_items([third])
    docs[second] = "apple apple apple"
    del docs[third]
    check()
    with store.transaction(write=True) as tx:
        tx.reindex_text(batch=3)  # rebuilt in batches: the statistics are the same
    check()
    assert first in docs


def test_a_common_term_ranks_its_newest_matches_with_the_whole_store_s_statistics(
    store: Store, seed: Seed, encrypted: bool
) -> None:
    """Over the budget, one term ranks its `budget` newest matches only (a window of the
    ranking statement on both backends), by BM25 whose document frequency and average length
    are still the whole index's: the same scores as an unbounded ranking, for those rows."""
    if encrypted:
        pytest.skip("an encrypted store indexes keyed tokens of its own (store/crypto.py): other lengths")
    # "common" in a minority of the rows: its IDF (~0.5) is not clamped, so any other document
    # frequency (the window's 8 rows: ~2.2) changes the scores
    bodies = [f"common {'word ' * (n % 4)}{n}" for n in range(30)] + [f"other text {n}" for n in range(50)]
    docs = {seed.item(body).id: body for body in bodies}
    expected = _bm25(docs, {"common": lambda t: t.count("common")})
    assert min(expected.values()) > 0.1
    with store.transaction(write=False) as tx:
        every = dict(tx.text_search(ALICE, ["common"], (), None, 100))
        window = dict(tx.text_search(ALICE, ["common"], (), None, 100, budget=8))
        exactly = dict(tx.text_search(ALICE, ["common"], (), None, 100, budget=30))  # every match
        more = dict(tx.text_search(ALICE, ["common"], (), None, 100, budget=31))
    newest = sorted(expected, reverse=True)[:8]
    assert every.keys() == expected.keys() == exactly.keys() == more.keys()
    assert sorted(window) == sorted(newest)
    for item_id in newest:
        assert window[item_id] == pytest.approx(expected[item_id], rel=1e-6)
    for item_id, score in expected.items():
        for ranked in (every, exactly, more):
            assert ranked[item_id] == pytest.approx(score, rel=1e-6)


def test_a_phrase_past_the_budget_ranks_its_newest_matches_alone_and_in_an_or(
    store: Store, seed: Seed, encrypted: bool
) -> None:
    """A CJK phrase over the budget, alone (its newest matches and its whole match count) and
    in an OR ranked as the rare terms' fallback (the window of the whole OR): whole-store
    BM25 for every row returned, a phrase counted only where its bigrams stand in order."""
    if encrypted:
        pytest.skip("an encrypted store indexes keyed tokens of its own (store/crypto.py): other lengths")
    bodies = ["zebra crossing"]  # the oldest match: found by the rare term alone
    bodies += [f"設計議論{'と設計議論' * (n % 3)} {n}" for n in range(12)]  # the phrase 1-3 times
    bodies += ["設計、議論、計議 zebra"]  # every bigram, never in order
    bodies += [f"other text {n}" for n in range(30)]
    docs = {seed.item(body).id: body for body in bodies}
    phrase = ["設計", "計議", "議論"]
    terms: dict[str, Callable[[list[str]], int]] = {
        "zebra": lambda t: t.count("zebra"),
        "設計議論": lambda t: _runs(t, phrase),
    }
    expected = _bm25(docs, terms)
    alone = _bm25(docs, {"設計議論": terms["設計議論"]})
    with store.transaction(write=False) as tx:
        newest = dict(tx.text_search(ALICE, ["設計議論"], (), None, 50, budget=5))
        either = dict(tx.text_search(ALICE, list(terms), (), None, 50, budget=5))
    matching = [i for i in docs if "設計議論" in docs[i]]
    assert len(matching) == 12
    assert sorted(newest) == sorted(matching)[-5:]
    for item_id, score in newest.items():
        assert score == pytest.approx(alone[item_id], rel=1e-6)
    zebras = [i for i in docs if "zebra" in docs[i]]
    window = sorted(matching + zebras)[-5:]  # the OR's five newest matches
    assert sorted(either) == sorted(set(zebras) | set(window))
    for item_id, score in either.items():
        assert score == pytest.approx(expected[item_id], rel=1e-6)


def test_two_words_of_one_stem_count_twice_on_both_backends(store: Store, seed: Seed) -> None:
    """An OR is ranked term by term as FTS5 ranks it: "apples" and "apple" are one indexed
    word, and each adds its BM25 (PostgreSQL once kept one term per tsquery: half the score)."""
    apple = seed.item("an apple pie")
    apples = seed.item("apples and apples")
    seed.item("a banana")
    with store.transaction(write=False) as tx:
        one = dict(tx.text_search(ALICE, ["apple"], (), None, 10))
        two = dict(tx.text_search(ALICE, ["apples", "apple"], (), None, 10))
    assert one.keys() == two.keys() == {apple.id, apples.id}
    for item_id, score in one.items():
        assert two[item_id] == pytest.approx(2 * score, rel=1e-6)
    # past the budget: the rarest term alone ranks its newest matches, too few for the limit,
    # so the whole OR is ranked again (its window): both words count there too
    notes = [seed.item(f"apple note {n}").id for n in range(5)]
    with store.transaction(write=False) as tx:
        one = dict(tx.text_search(ALICE, ["apple"], (), None, 10, budget=4))
        two = dict(tx.text_search(ALICE, ["apples", "apple"], (), None, 10, budget=4))
    assert sorted(one) == sorted(two) == notes[-4:]
    for item_id, score in one.items():
        assert two[item_id] == pytest.approx(2 * score, rel=1e-6)
