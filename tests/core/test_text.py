"""CJK bigrams, normalisation and always-safe FTS queries."""

from __future__ import annotations

import pytest

from memhub.core.text import bigrams, index_terms, index_text, is_cjk, keyword_terms, normalize

NASTY = [
    '"',
    "*",
    "NEAR(",
    "OR",
    "AND",
    "NOT",
    "a OR b",
    '"unterminated',
    "col:x",
    "^x",
    "(",
    ")",
    "-",
    "+",
    "{a b}",
    "\ud800",
    "🙂",
    "",
    "   ",
    "x" * 10_000,
    "NEAR(a b, 2)",
    "'; DROP TABLE x; --",
]


def test_bigrams() -> None:
    assert bigrams("設計") == ["設計"]
    assert bigrams("プランモード") == ["プラ", "ラン", "ンモ", "モー", "ード"]
    assert bigrams("字") == ["字"]


def test_index_text_cuts_cjk_runs_and_keeps_latin_words() -> None:
    assert index_text("TODO分解の粒度", "Plan Mode") == "todo 分解 解の の粒 粒度 plan mode"


def test_normalize_unifies_width_and_case() -> None:
    assert normalize("ＳＱＬｉｔｅ ｶﾀｶﾅ") == "sqlite カタカナ"


def test_keyword_terms() -> None:
    assert keyword_terms("  Plan  MODE plan ") == ["plan", "mode"]
    assert keyword_terms("   ") == []


def test_content_words_cut_japanese_at_script_changes() -> None:
    from memhub.core.text import content_words, search_terms
    from memhub.store.sqlite.fts import match_term

    def fts_terms(query: str, split_cjk: bool = False) -> list[str]:
        return [match_term(term) for term in search_terms(query, split_cjk=split_cjk)]

    assert content_words("データベース移行の進め方") == ["データベース", "移行"]
    assert content_words("の型安全性について教えて") == ["型安全性"]  # 教 alone is dropped
    assert content_words("ありがとう") == ["ありがとう"]  # hiragana only: kept whole
    assert content_words("設") == ["設"]
    assert fts_terms("TypeScriptの型安全性", split_cjk=True) == ['"typescript"', '"型安 安全 全性"']
    assert fts_terms("TypeScriptの型安全性") == ['"typescript"', '"の型 型安 安全 全性"']  # one phrase


def test_term_coverage_is_the_share_of_query_terms_a_text_contains() -> None:
    from memhub.core.text import term_coverage

    share = term_coverage("how do we handle the cache layer")  # terms: handle, cache, layer
    assert share("We cached the layer's results") == pytest.approx(2 / 3)  # stems: cach, layer
    assert share("Handling caches in every layer") == 1.0
    assert share("nothing in common") == 0.0
    japanese = term_coverage("データベース移行の進め方")  # one CJK run: it must appear whole
    assert japanese("データベース移行の進め方を決めた") == 1.0
    assert japanese("データベース移行") == 0.0
    assert term_coverage("!!!")("anything") == 1.0  # no terms: keywords are not penalised


def test_matched_terms_agree_with_the_stems_of_every_word() -> None:
    """`matched_terms` rules texts out by substring before it stems their words: the same
    answer as comparing with the stem of every word (the definition), on words that stem,
    double a consonant, hide a key inside another word, or are CJK runs."""
    from memhub.core.text import _WORDS, _coverage_terms, matched_terms, normalize, stem

    queries = [
        "how do we handle the cache layer",
        "running deploys safely",
        "Retries retried retrying",
        "データベース移行の進め方 deploy",
        "pg_dump backups nightly",
        "planning plans planned planner",
    ]
    texts = [
        "We cached the layer's results",
        "Handling caches in every layer",
        "the runner ran; deployment deployed",
        "redeploy the scheduler (predeployment)",
        "retry later: RETRIES are retried",
        "データベース移行の進め方を決めた; deploys",
        "pg_dump ran the backup nightly",
        "planet planes plan planned planning",
        "nothing in common",
        "",
    ]
    for query in queries:
        terms = _coverage_terms(query)
        found = matched_terms(query)
        for text in texts:
            normal = normalize(text)
            stems = {stem(word) for word in _WORDS.findall(normal)}
            expected = [term for cjk, term, key in terms if (key in normal if cjk else key in stems)]
            assert found(text) == expected, (query, text)


def test_index_terms_are_the_terms_of_index_text() -> None:
    for text in ("TODO分解の粒度 Plan Mode", "pg_dump ＡＢＣ ｶﾀｶﾅ 東京タワー été x² Ⅻ 1½", "", "a"):
        assert index_terms(text) == index_text(text).split()


def _runs_by_character(text: str) -> list[str]:
    """The tokenisation the FTS rows of existing stores were cut by, one character at a time:
    a run is CJK characters or `str.isalnum` ones; anything else ends it."""
    terms: list[str] = []
    current: list[str] = []
    current_cjk = False
    for char in normalize(text):
        kind = True if is_cjk(char) else (False if char.isalnum() else None)
        if current and kind != current_cjk:
            terms.extend(bigrams("".join(current)) if current_cjk else ["".join(current)])
            current = []
        if kind is not None:
            current.append(char)
            current_cjk = kind
    if current:
        terms.extend(bigrams("".join(current)) if current_cjk else ["".join(current)])
    return terms


def test_the_regex_tokeniser_cuts_every_code_point_as_the_character_loop_did() -> None:
    every = [chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]
    for start in range(0, len(every), 512):
        chunk = "".join(every[start : start + 512])
        mixed = "".join(f"{char}a{char}設{char}" for char in every[start : start + 64])
        assert index_terms(chunk) == _runs_by_character(chunk), hex(ord(every[start]))
        assert index_terms(mixed) == _runs_by_character(mixed), hex(ord(every[start]))
    assert index_terms("設計方針とpg_dump") == ["設計", "計方", "方針", "針と", "pg", "dump"]
