"""Redact-before-send: find e-mail addresses, phone numbers and secrets in text, and mask them.

One detector serves every caller: `pce.memory.upsert` classifies a claim with it (a claim
holding a secret is never stored below `secret`), `pce.memory.boundary.validate` answers with
it, and the pce output filter masks secrets with it.

Detectors scan a normalised view of the text with the same length as the text, so every span
found is the span to mask in the original: each character is replaced by its NFKC form when
that is one character (full-width `０９０－１２３４` and `taro＠example.co.jp` read as ASCII,
the ideographic space as a space), dashes (‐ ‒ – — − ﹣) read as `-`, and the long-vowel mark
`ー` between two digits (`090ー1234ー5678`) as `-`.

Boundaries are ASCII: a token or number glued to kana or kanji (`キーはAKIA…です`,
`メールはtaro@example.co.jpまで`, `電話:09012345678です`) is found, while one glued to ASCII
letters, digits or joiners (`ORD-03-1234-5678`, `v2.3.1`, `INV-090-1234-5678`) is not; a
phone number may follow a label written against it (`TEL090-1234-5678`, `Tel.03-1234-5678`).
Phones need the digit count of a real number: Japanese landlines 10 digits, mobiles and IP
phones (090/080/070/050) 11, `+` international 8-15, North American `(415) 555-0100` and
`415-555-0100` (area and exchange codes start with 2-9). Version numbers, dates, times,
prices, ISBNs, UUIDs, git SHAs and postal codes are not phones.

Every match is replaced by `[REDACTED:<kind>]`; the text around it is kept as it was.
tests/policy/test_redact_corpus.py measures precision and recall on a corpus of positives
and near-misses (docs/pce.md gives the numbers).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

PII_KINDS = ("email", "phone")
SECRET_KINDS = (
    "private_key", "aws_access_key", "aws_secret_key", "github_token", "stripe_key", "slack_token",
    "google_api_key", "openai_key", "jwt", "bearer_token", "url_password", "password",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    start: int
    end: int

    @property
    def category(self) -> str:
        return "pii" if self.kind in PII_KINDS else "secret"


# -- the normalised view ---------------------------------------------------------------------

_DASHES = frozenset("\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58\ufe63\uff0d")
_LONG_VOWEL = "\u30fc"  # ー (the half-width ｰ becomes it under NFKC)
_SPECIAL = re.compile("[" + "".join(sorted(_DASHES)) + _LONG_VOWEL + "]")


@lru_cache(maxsize=4096)
def _one(char: str) -> str:
    if char in _DASHES:
        return "-"
    folded = unicodedata.normalize("NFKC", char)
    return folded if len(folded) == 1 else char


def normalised(text: str) -> str:
    """`text` read the way the detectors read it, one character for one character."""
    if text.isascii() or (unicodedata.is_normalized("NFKC", text) and _SPECIAL.search(text) is None):
        return text
    chars = [c if c.isascii() else _one(c) for c in text]
    for i in range(1, len(chars) - 1):
        if chars[i] == _LONG_VOWEL and _is_digit(chars[i - 1]) and _is_digit(chars[i + 1]):
            chars[i] = "-"
    return "".join(chars)


def _is_digit(char: str) -> bool:
    return "0" <= char <= "9"


# -- checks on a match -----------------------------------------------------------------------

_PHONE_LABELS = frozenset({"tel", "tell", "telephone", "phone", "ph", "fax", "mobile", "mob", "cell", "call"})


def _phone_context(norm: str, start: int) -> bool:
    """ASCII letters right before a phone must be a label (`TEL090…`, `Tel.03-…`, `fax:`)."""
    i = start - 1 if start > 0 and norm[start - 1] in ".:" else start
    j = i
    while j > 0 and norm[j - 1].isascii() and norm[j - 1].isalpha():
        j -= 1
    return norm[j:i].lower() in _PHONE_LABELS if j < i else i == start or norm[i] == ":"


def _digits(text: str) -> int:
    return sum(c.isdigit() for c in text)


def _jp_phone(text: str) -> bool:
    digits = _digits(text)
    if text.startswith("+"):
        return 10 <= digits <= 13  # +81 then 9-10 digits (the trunk 0 dropped)
    if re.match(r"0[5789]0", re.sub(r"\D", "", text)):
        return digits == 11
    return digits == 10


def _e164(text: str) -> bool:
    return 8 <= _digits(text) <= 15 and (not text.startswith("+81") or _jp_phone(text))


def _nanp(text: str) -> bool:
    """`(415) 555-0100`, `415-555-0100`, `415.555.0100`, `1-800-555-0199`: one separator kind."""
    seps = set(re.sub(r"[\d()]", "", text).replace(" ", "")) - {""}
    return len(seps) <= 1


def _mixed_token(text: str) -> bool:
    """A key-like token: letters and digits both (not a word, not a hyphenated phrase)."""
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _aws_secret_like(text: str) -> bool:
    """40 base64 characters with upper and lower case (a git SHA is lower-case hex)."""
    return any(c.isupper() for c in text) and any(c.islower() for c in text) and _mixed_token(text)


_PLACEHOLDER = re.compile(r"^(?:\$\{|\$\(|\{\{|<|%\(|%s|\[)|^([*xX.•])\1*$")


def _value(text: str) -> bool:
    """An assigned value, not a placeholder (`${DB_PASSWORD}`, `<your-key>`, `{{ secret }}`, `****`)."""
    return _PLACEHOLDER.match(text) is None


# -- rules -----------------------------------------------------------------------------------

_NOT_AN = r"(?<![A-Za-z0-9])"  # no ASCII letter or digit right before (kana and kanji are fine)
_TOKEN_START = r"(?<![A-Za-z0-9_\-])"
_TOKEN_END = r"(?![A-Za-z0-9_\-])"
# not a part of a longer number, id, version or path (a `.` only after a letter: `Tel.`)
_NUM_START = r"(?:(?<=[A-Za-z]\.)|(?<![0-9\-./+_@#$%&=~\\]))"
_NUM_END = r"(?![0-9A-Za-z_\-/@]|\.\d)"  # a sentence's full stop is fine
_SEP = r"(?: ?- ?| |\.)"  # between phone digit groups: a hyphen, a space or a dot
# an assigned value: visible characters (accented letters and symbols too, not kana or kanji,
# which are the sentence going on) up to a space, quote, comma or semicolon (a mask is not a value)
_PW_VALUE = (
    r"['\"「『]?(?!\[REDACTED:)((?:(?![\"'`,;「」『』\u3000-\u30ff\u3400-\u9fff\uff00-\uffef])\S){%d,})"
)
_SECRET_LABELS_JA = r"(?:APIキー|アクセスキー|シークレット(?:アクセス)?キー|シークレット|トークン|秘密鍵)"

Check = Callable[[str, str, int, int], bool]  # (masked text, normalised text, start, end)


def _text(check: Callable[[str], bool]) -> Check:
    return lambda masked, _norm, _start, _end: check(masked)


def _phone(check: Callable[[str], bool]) -> Check:
    return lambda masked, norm, start, _end: check(masked) and _phone_context(norm, start)


# (kind, pattern, group to mask (0: the whole match), extra check)
_RULES: list[tuple[str, re.Pattern[str], int, Check | None]] = [
    ("private_key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    ), 0, None),
    ("url_password", re.compile(r"(?<![A-Za-z0-9+.\-])[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:([^\s@/]+)@"),
     1, None),
    ("jwt", re.compile(_TOKEN_START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
     0, None),
    ("bearer_token", re.compile(r"(?i)" + _NOT_AN + r"bearer\s+([A-Za-z0-9._~+/-]{16,}=*)"), 1, None),
    ("aws_access_key", re.compile(
        _NOT_AN + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    ), 0, None),
    ("aws_secret_key", re.compile(
        r"(?i)(?:aws[ _-]?)?secret(?:[ _-]?access)?[ _-]?key(?:[ _-]?id)?\W{0,3}[:=は]?\s*['\"]?"
        r"(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
    ), 1, _text(_aws_secret_like)),
    ("github_token", re.compile(
        _TOKEN_START + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})(?![A-Za-z0-9_])"
    ), 0, None),
    ("stripe_key", re.compile(
        _TOKEN_START + r"(?:(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})"
        r"(?![A-Za-z0-9])"
    ), 0, None),
    ("slack_token", re.compile(_TOKEN_START + r"xox[abprse]-[A-Za-z0-9-]{10,}(?![A-Za-z0-9])"), 0, None),
    ("google_api_key", re.compile(_TOKEN_START + r"AIza[0-9A-Za-z_-]{35}" + _TOKEN_END), 0, None),
    ("openai_key", re.compile(_TOKEN_START + r"sk-(?:[A-Za-z]+-)?[A-Za-z0-9_-]{20,}" + _TOKEN_END), 0,
     _text(lambda t: _mixed_token(t[3:]))),
    ("password", re.compile(
        r"(?i)" + _NOT_AN + r"(?:password|passwd|passphrase|pwd|api[_-]?key|secret[_-]?key|access[_-]?token"
        r"|auth[_-]?token|client[_-]?secret)\s*[:=]\s*" + _PW_VALUE % 8
    ), 1, _text(_value)),
    # a quoted value may hold kana and kanji: パスワードは「秘密のパスワード123」 (if it has a letter,
    # digit or symbol of ASCII: 「設定画面」 is a place, not a password)
    ("password", re.compile(
        r"(?:パスワード|暗証番号|パスフレーズ)\s*(?:[:=]|は)\s*[「『](?!\[REDACTED:)((?=[^」』\n]*[!-~])[^」』\n]{4,64})[」』]"
    ), 1, None),
    ("password", re.compile(r"(?:パスワード|暗証番号|パスフレーズ)\s*(?:[:=]|は)\s*" + _PW_VALUE % 6), 1,
     _text(_value)),
    ("password", re.compile(_SECRET_LABELS_JA + r"\s*(?:[:=]|は)\s*" + _PW_VALUE % 16), 1,
     _text(lambda t: _mixed_token(t) and _value(t))),
    ("email", re.compile(
        r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9_%+\-][A-Za-z0-9._%+\-]*@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
        r"\.(?!(?:png|jpe?g|gif|svg|webp|ico|bmp)(?![A-Za-z]))[A-Za-z]{2,24}(?![A-Za-z0-9\-@]|:[A-Za-z0-9])"
    ), 0, None),
    # international: + and 8-15 digits
    ("phone", re.compile(_NUM_START + r"\+\d{1,3}(?:[ \-]?\(?\d{1,4}\)?){2,4}[ \-]?\d{3,4}" + _NUM_END), 0,
     _phone(_e164)),
    # Japanese: 03-1234-5678, 090 1234 5678, 090.1234.5678, (03) 1234-5678, 03(1234)5678, 09012345678
    ("phone", re.compile(_NUM_START + r"0\d{1,4}" + _SEP + r"\d{1,4}" + _SEP + r"\d{3,4}" + _NUM_END), 0,
     _phone(_jp_phone)),
    ("phone", re.compile(_NUM_START + r"\(0\d{1,4}\) ?\d{1,4}(?:" + _SEP + r")?\d{3,4}" + _NUM_END), 0,
     _phone(_jp_phone)),
    ("phone", re.compile(_NUM_START + r"0\d{1,4}\(\d{1,4}\)\d{3,4}" + _NUM_END), 0, _phone(_jp_phone)),
    ("phone", re.compile(_NUM_START + r"0[5789]0\d{8}" + _NUM_END), 0, _phone(_jp_phone)),
    # a labelled landline without separators: 電話:0312345678, TEL0312345678
    ("phone", re.compile(
        r"(?i)(?:(?<![A-Za-z])(?:tel|phone|fax)|電話(?:番号)?|携帯(?:電話)?|連絡先)\s*[:.]?\s*(0\d{9})"
        + _NUM_END
    ), 1, None),
    # North American: (415) 555-0100, 415-555-0100, 415.555.0100, 1-800-555-0199
    ("phone", re.compile(
        _NUM_START + r"(?:1[ \-.])?(?:\([2-9]\d{2}\) ?|[2-9]\d{2}[ \-.])[2-9]\d{2}[ \-.]\d{4}" + _NUM_END
    ), 0, _phone(_nanp)),
]  # fmt: skip

# an unlabelled AWS secret access key: 40 base64 characters near an access key id
_AWS_SECRET_NEAR = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_NEAR = 200  # at most this many characters between an access key id and its secret


def scan(text: str, kinds: Iterable[str] | None = None) -> list[Finding]:
    """Every sensitive span of `text` (of `kinds`, default all), earliest first; overlapping
    matches keep the first rule's. Spans index `text` itself."""
    norm = normalised(text)
    wanted = None if kinds is None else frozenset(kinds)
    found: list[Finding] = []  # kept sorted by start; never overlapping

    def add(kind: str, start: int, end: int) -> None:
        at = bisect.bisect_left(found, start, key=lambda f: f.start)
        if (at > 0 and found[at - 1].end > start) or (at < len(found) and found[at].start < end):
            return  # overlaps a finding of an earlier rule
        found.insert(at, Finding(kind, start, end))

    for kind, pattern, group, check in _RULES:
        if wanted is not None and kind not in wanted:
            continue
        for match in pattern.finditer(norm):
            start, end = match.span(group)
            if kind == "password":  # a sentence's full stop or closing bracket is not the value's
                end = start + len(match.group(group).rstrip(".)]"))
            if check is None or check(match.group(group), norm, start, end):
                add(kind, start, end)
    keys = [f.start for f in found if f.kind == "aws_access_key"]
    if keys and (wanted is None or "aws_secret_key" in wanted):
        for match in _AWS_SECRET_NEAR.finditer(norm):
            start, end = match.span()
            at = bisect.bisect_left(keys, start - _NEAR)
            near = at < len(keys) and keys[at] <= end + _NEAR
            if near and _aws_secret_like(match.group()):
                add("aws_secret_key", start, end)
    return found


def classify(findings: Iterable[Finding]) -> str:
    """The boundary class a text needs: secret > pii > internal (unlabelled text is internal)."""
    categories = {f.category for f in findings}
    return "secret" if "secret" in categories else "pii" if "pii" in categories else "internal"


def redact(
    text: str, kinds: Iterable[str], findings: list[Finding] | None = None
) -> tuple[str, Counter[str]]:
    """`text` with every finding of `kinds` masked, and how many of each kind were masked."""
    wanted = set(kinds)
    spans = [f for f in (scan(text, wanted) if findings is None else findings) if f.kind in wanted]
    out, last, counts = [], 0, Counter[str]()
    for finding in spans:
        out.append(text[last : finding.start])
        out.append(f"[REDACTED:{finding.kind}]")
        last = finding.end
        counts[finding.kind] += 1
    out.append(text[last:])
    return "".join(out), counts


# every secret rule's match holds one of these (a cheap test before running the rules)
_SECRET_HINT = re.compile(
    r"PRIVATE KEY|://|eyJ|AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|gh[pousr]_|github_pat_|_live_|_test_"
    r"|whsec_|xox|AIza|sk-|(?i:bearer|secret|passw|passphrase|pwd|api[_-]?key|token)"
    r"|パスワード|暗証番号|パスフレーズ|キー|トークン|シークレット|秘密鍵"
)


def redact_secrets(text: str) -> str:
    """`text` with every secret masked (what no output may ever carry)."""
    if _SECRET_HINT.search(normalised(text)) is None:
        return text
    return redact(text, SECRET_KINDS)[0]


def without_secrets(value: Any) -> Any:
    """A JSON-like value with every string's secrets masked (keys are kept)."""
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {k: without_secrets(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_secrets(v) for v in value]
    return value
