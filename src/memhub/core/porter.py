"""Porter's stemming algorithm (1980), as SQLite's FTS5 `porter` tokenizer applies it.

The encrypted store's blind index (store/crypto.py) hashes words, so FTS5 cannot stem them;
it stems them here first, the same way, so `runs` still finds `run` and `notes` is still not
`not`. Only lowercase ASCII words of three letters or more are stemmed (as in FTS5).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

_VOWELS = "aeiou"


def _consonant(word: str, i: int) -> bool:
    char = word[i]
    if char in _VOWELS:
        return False
    if char == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """m in [C](VC)^m[V]."""
    m, i, n = 0, 0, len(stem)
    while i < n and _consonant(stem, i):
        i += 1
    while i < n:
        while i < n and not _consonant(stem, i):
            i += 1
        if i >= n:
            break
        while i < n and _consonant(stem, i):
            i += 1
        m += 1
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _double(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    if len(word) < 3:
        return False
    n = len(word)
    return (
        _consonant(word, n - 3)
        and not _consonant(word, n - 2)
        and _consonant(word, n - 1)
        and word[-1] not in "wxy"
    )


def _replace(word: str, rules: list[tuple[str, str]], condition: Callable[[str], bool]) -> str:
    """The longest matching suffix decides; its replacement applies when `condition(stem)`."""
    for suffix, replacement in rules:
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            return stem + replacement if condition(stem) else word
    return word


def _m_over(k: int) -> Callable[[str], bool]:
    return lambda stem: _measure(stem) > k


_STEP2 = sorted(
    {
        "ational": "ate", "tional": "tion", "enci": "ence", "anci": "ance", "izer": "ize", "bli": "ble",
        "alli": "al", "entli": "ent", "eli": "e", "ousli": "ous", "ization": "ize", "ation": "ate",
        "ator": "ate", "alism": "al", "iveness": "ive", "fulness": "ful", "ousness": "ous", "aliti": "al",
        "iviti": "ive", "biliti": "ble", "logi": "log",
    }.items(),
    key=lambda rule: -len(rule[0]),
)  # fmt: skip
_STEP3 = sorted(
    {"icate": "ic", "ative": "", "alize": "al", "iciti": "ic", "ical": "ic", "ful": "", "ness": ""}.items(),
    key=lambda rule: -len(rule[0]),
)
_STEP4 = sorted(
    (s, "")
    for s in "al ance ence er ic able ible ant ement ment ent ion ou ism ate iti ous ive ize".split()  # noqa: SIM905
)
_STEP4.sort(key=lambda rule: -len(rule[0]))


def _step1(word: str) -> str:
    if (word.endswith("sses") and len(word) > 4) or (word.endswith("ies") and len(word) > 3):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    if word.endswith("eed") and _measure(word[:-3]) > 0:
        return word[:-1]
    if word.endswith("eed") and len(word) > 3:
        return word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            word = word[: -len(suffix)]
            if word.endswith(("at", "bl", "iz")):
                return word + "e"
            if _double(word) and word[-1] not in "lsz":
                return word[:-1]
            if _measure(word) == 1 and _cvc(word):
                return word + "e"
            return word
    return word


def _step4(word: str) -> str:
    for suffix, _ in _STEP4:
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            if _measure(stem) > 1 and (suffix != "ion" or stem.endswith(("s", "t"))):
                return stem
            return word
    return word


def porter_stem(word: str) -> str:
    if len(word) < 3 or not word.isascii() or not word.isalpha() or not word.islower():
        return word
    word = _step1(word)
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    word = _replace(word, _STEP2, _m_over(0))
    word = _replace(word, _STEP3, _m_over(0))
    word = _step4(word)
    if word.endswith("e"):
        stem = word[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            word = stem
    if _measure(word) > 1 and _double(word) and word.endswith("l"):
        word = word[:-1]
    return word


def fold_word(word: str) -> str:
    """A (normalised, non-CJK) word as FTS5's `porter unicode61 remove_diacritics 2` tokenizer
    indexes it: diacritics off, then Porter's stem. Indexes built outside FTS5 (the blind index
    of store/crypto.py, PostgreSQL's tsvector) fold their words with it."""
    return porter_stem("".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c)))
