"""Text normalisation shared by the index (store) and the queries (search).

SQLite's FTS5 `unicode61` tokenizer sees a Japanese sentence as one long token, so CJK runs
are cut here into overlapping character bigrams (`設計方針` -> `設計 計方 方針`), the classic
CJK indexing scheme: a query term matches when its bigrams appear as a phrase. Latin text
is left to the tokenizer (porter stemming, diacritics folded).

Queries are never passed to a text index as written: `search_terms` keeps only word
characters, and each backend quotes every term in its own syntax (store/sqlite/fts.py), so
`"`, `*`, `NEAR(`, `OR`, `-` and friends in user text are plain text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

_CJK_RANGES = (
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3040, 0x309F),  # hiragana
    (0x30A0, 0x30FF),  # katakana (incl. ー)
    (0x31F0, 0x31FF),  # katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x2FA1F),  # CJK extensions B..F, compatibility supplement
)

# Frequent English function words: dropped from OR-queries, where they only add noise.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves
    """.split()  # noqa: SIM905
)


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def normalize(text: str) -> str:
    """NFKC (full-width Latin and half-width katakana unified) and case-folded."""
    return unicodedata.normalize("NFKC", text).casefold()


# A run is letters and digits inside the CJK ranges (group 1) or outside them; `[^\\W_]` is
# `str.isalnum`, so separators and `_` cut runs. One regex: the index, the queries and the
# association overlap (calibration) all cut text here.
_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _CJK_RANGES)
_RUNS = re.compile(f"([{_CJK_CLASS}]+)|(?:(?![{_CJK_CLASS}])[^\\W_])+")
_WORDS = re.compile(f"(?:(?![{_CJK_CLASS}])[^\\W_])+")  # the non-CJK runs alone
_CJK_CHARS = re.compile(f"[{_CJK_CLASS}]+")


def cjk_chars(text: str) -> list[str]:
    """The runs of characters of `text` inside the CJK ranges (is_cjk), in order."""
    return _CJK_CHARS.findall(text)


def _runs(text: str) -> list[tuple[bool, str]]:
    """Split normalised text into (is_cjk, run) pieces of word characters; separators dropped."""
    return [(match.group(1) is not None, match.group(0)) for match in _RUNS.finditer(text)]


def bigrams(run: str) -> list[str]:
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(*parts: str | None) -> str:
    """The text an FTS5 row stores: Latin words as they are, CJK runs as bigrams."""
    return " ".join(term for part in parts if part for term in index_terms(part))


def index_terms(text: str) -> list[str]:
    """The terms of `index_text(text)`: Latin words as they are, CJK runs as bigrams."""
    out: list[str] = []
    for cjk, run in _runs(normalize(text)):
        out.extend(bigrams(run) if cjk else [run])
    return out


def _script(char: str) -> str:
    code = ord(char)
    if 0x3040 <= code <= 0x309F:
        return "hiragana"
    if 0x30A0 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF:
        return "katakana"
    if 0xAC00 <= code <= 0xD7AF:
        return "hangul"
    return "han"  # ideographs and 々 〆 〇


def content_words(run: str) -> list[str]:
    """The content words of a CJK run, for ranked retrieval without a dictionary.

    Japanese writes content words in kanji or katakana and grammar (particles, endings) in
    hiragana, so a run is cut where the script changes and its hiragana pieces are dropped:
    `データベース移行の進め方` -> `データベース`, `移行`. Single characters go too when a longer
    piece is left (`進`, `方` above). A run of hiragana only is kept whole.
    """
    pieces: list[str] = []
    for char in run:
        if char == "・":  # a separator between katakana words
            pieces.append("")
        elif pieces and pieces[-1] and (char == "ー" or _script(pieces[-1][-1]) == _script(char)):
            pieces[-1] += char  # ー lengthens whatever precedes it
        else:
            pieces.append(char)
    content = [p for p in pieces if p.strip("ー") and _script(p[0]) != "hiragana"]
    if not content:
        return [run]
    longer = [p for p in content if len(p) > 1]
    return longer or content


def query_terms(
    query: str, *, drop_stopwords: bool = False, split_cjk: bool = False
) -> list[tuple[bool, str]]:
    """The (is_cjk, term) pieces of a user query, de-duplicated, in order: English stopwords
    dropped if asked, a CJK run one term (a phrase) or, with `split_cjk`, its content words."""
    seen: set[str] = set()
    terms: list[tuple[bool, str]] = []
    for cjk, run in _runs(normalize(query)):
        if not cjk and drop_stopwords and run in STOPWORDS:
            continue
        for term in content_words(run) if cjk and split_cjk else [run]:
            if term not in seen:
                seen.add(term)
                terms.append((cjk, term))
    return terms


_SUFFIXES = ("ing", "ed", "es", "s", "ly", "er", "e")


STEM_CACHED = 24  # words up to this long have their stems cached (a bounded cache of short keys)


def _stem(word: str) -> str:
    """A light suffix stripper (running -> run, deploys -> deploy): close enough to FTS5's
    porter stemming to tell whether a memory contains a query word. The words of a store
    repeat and a search stems thousands of them: short ones are cached; a long one (a hash, a
    URL, base64) would pin its text in the cache, so it is stemmed afresh."""
    return _stem_short(word) if len(word) <= STEM_CACHED else _strip(word)


@lru_cache(maxsize=1 << 14)
def _stem_short(word: str) -> str:
    return _strip(word)


def _strip(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            if stem[-1] == stem[-2] and stem[-1] not in "lsz":  # running -> runn -> run
                stem = stem[:-1]
            return stem
    return word


def stem(word: str) -> str:
    """The light stem of a normalised English word (running -> run, deploys -> deploy)."""
    return _stem(word)


def _coverage_terms(query: str) -> list[tuple[bool, str, str]]:
    """(is_cjk, term, what is compared: the light stem of a word, a CJK run whole)."""
    pieces = query_terms(query, drop_stopwords=True) or query_terms(query)
    return [(cjk, term, term if cjk else _stem(term)) for cjk, term in pieces]


def _found(terms: list[tuple[bool, str, str]], text: str) -> list[str]:
    normal = normalize(text)
    found: list[str] = []
    stems: set[str] | None = None
    for cjk, term, key in terms:
        # a stem is a prefix of its word (`_stem`), so a key that is not a substring of the
        # text is in no word of it: most texts are ruled out without splitting them into words
        if key not in normal:
            continue
        if not cjk:
            if stems is None:
                stems = {_stem(word) for word in _WORDS.findall(normal)}
            if key not in stems:
                continue
        found.append(term)
    return found


def matched_terms(query: str) -> Callable[[str], list[str]]:
    """A function of a text: which of `query`'s keyword terms it contains (the terms
    `term_coverage` counts)."""
    terms = _coverage_terms(query)
    return lambda text: _found(terms, text)


def term_coverage(query: str) -> Callable[[str], float]:
    """A function of a text: the share (0-1) of `query`'s keyword terms it contains. English
    words are compared after light stemming, stopwords ignored; a CJK run must appear whole.
    1.0 for a query without terms."""
    terms = _coverage_terms(query)

    def share(text: str) -> float:
        return len(_found(terms, text)) / len(terms) if terms else 1.0

    return share


def search_terms(
    query: str, *, drop_stopwords: bool = True, split_cjk: bool = False, max_terms: int = 32
) -> list[str]:
    """The plain terms of `query` for ranked keyword search (`Tx.text_search`), in order:
    normalised words, and CJK runs that must occur whole (a backend turns each into its own
    query syntax, so nothing a user types is ever query syntax).

    Stopwords are dropped when asked unless nothing else is left. `split_cjk` cuts CJK runs
    into content words (recall: BM25 on its own finds Japanese paraphrases); without it a
    whole run must appear (precision: what hybrid search wants from its keyword side, see
    SearchEngine). Empty when `query` has no searchable term.
    """
    terms = query_terms(query, drop_stopwords=drop_stopwords, split_cjk=split_cjk) or query_terms(query)
    return [term for _, term in terms[:max_terms]]


_SPACE = re.compile(r"\s+")


def keyword_terms(keyword: str, *, max_terms: int = 16) -> list[str]:
    """Substring-search terms: whitespace-separated, normalised, non-empty, de-duplicated."""
    seen: list[str] = []
    for term in _SPACE.split(normalize(keyword).strip()):
        if term and term not in seen:
            seen.append(term)
    return seen[:max_terms]
