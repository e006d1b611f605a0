"""Redact-before-send: find e-mail addresses, phone numbers and secrets in text, and mask them.

Detectors are regular expressions with boundaries that keep near-misses out: version numbers
(1.2.3), dates (2024-03-15), order ids (ORD-03-1234-5678) and plain long numbers are not
phones; a phone needs the digit count of a real number (Japanese landlines 10 digits,
mobiles 11, international E.164 8-15 after the '+'). Every match is replaced by
`[REDACTED:<kind>]`; the text around it is kept as it was.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

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


_B = r"(?<![\w+\-./])"  # nothing word-like (or joined by - . / +) right before
_E = r"(?![\w\-/]|\.\d)"  # nothing word-like right after (a sentence's full stop is fine)


def _digits(text: str) -> int:
    return sum(c.isdigit() for c in text)


def _jp_phone(text: str) -> bool:
    digits = _digits(text)
    if text.startswith("+"):
        return 10 <= digits <= 13  # +81 then 9-10 digits (the trunk 0 dropped)
    if re.match(r"0[5789]0", text.replace("-", "").replace(" ", "")):
        return digits == 11
    return digits == 10


# (kind, pattern, group to mask (0: the whole match), extra check of the masked text)
_RULES: list[tuple[str, re.Pattern[str], int, Callable[[str], bool] | None]] = [
    ("private_key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    ), 0, None),
    ("url_password", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:([^\s@/]+)@"), 1, None),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0, None),
    ("bearer_token", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]{16,}=*)"), 1, None),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), 0, None),
    ("aws_secret_key", re.compile(
        r"(?i)aws_?secret(?:_?access)?_?key\W{0,3}[:=]\s*['\"]?([A-Za-z0-9/+=]{40})\b"
    ), 1, None),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"), 0, None),
    ("stripe_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}\b|\bwhsec_[A-Za-z0-9]{24,}\b"),
     0, None),
    ("slack_token", re.compile(r"\bxox[abprse]-[A-Za-z0-9-]{10,}\b"), 0, None),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), 0, None),
    ("openai_key", re.compile(r"\bsk-(?:[A-Za-z]+-)?[A-Za-z0-9_-]{20,}\b"), 0, None),
    ("password", re.compile(
        r"(?i)\b(?:password|passwd|pwd|api[_-]?key|secret[_-]?key|access[_-]?token|client[_-]?secret)"
        r"\s*[:=]\s*['\"]?([^\s'\",;]{8,})"
    ), 1, None),
    ("password", re.compile(r"(?:パスワード|暗証番号)\s*[:：は]\s*([^\s、。]{6,})"), 1, None),
    ("email", re.compile(
        r"(?<![\w.+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,24}(?![\w\-@]|:\w)"
    ), 0, None),
    ("phone", re.compile(_B + r"\+\d{1,3}(?:[ \-]?\(?\d{1,4}\)?){2,4}[ \-]?\d{3,4}" + _E), 0,
     lambda t: 8 <= _digits(t) <= 15 and (not t.startswith("+81") or _jp_phone(t))),
    ("phone", re.compile(_B + r"0\d{1,4}-\d{1,4}-\d{3,4}" + _E), 0, _jp_phone),
    ("phone", re.compile(_B + r"0[5789]0\d{8}" + _E), 0, _jp_phone),
    ("phone", re.compile(_B + r"\(0\d{1,4}\)\s?\d{1,4}-\d{4}" + _E), 0, lambda t: _digits(t) == 10),
]  # fmt: skip


def scan(text: str) -> list[Finding]:
    """Every sensitive span, earliest first; overlapping matches keep the first rule's."""
    found: list[Finding] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern, group, check in _RULES:
        for match in pattern.finditer(text):
            start, end = match.span(group)
            if check is not None and not check(match.group(group)):
                continue
            if any(start < t_end and t_start < end for t_start, t_end in taken):
                continue
            taken.append((start, end))
            found.append(Finding(kind, start, end))
    return sorted(found, key=lambda f: f.start)


def classify(findings: Iterable[Finding]) -> str:
    """The boundary class a text needs: secret > pii > internal (unlabelled text is internal)."""
    categories = {f.category for f in findings}
    return "secret" if "secret" in categories else "pii" if "pii" in categories else "internal"


def redact(
    text: str, kinds: Iterable[str], findings: list[Finding] | None = None
) -> tuple[str, Counter[str]]:
    """`text` with every finding of `kinds` masked, and how many of each kind were masked."""
    wanted = set(kinds)
    spans = [f for f in (scan(text) if findings is None else findings) if f.kind in wanted]
    out, last, counts = [], 0, Counter[str]()
    for finding in spans:
        out.append(text[last : finding.start])
        out.append(f"[REDACTED:{finding.kind}]")
        last = finding.end
        counts[finding.kind] += 1
    out.append(text[last:])
    return "".join(out), counts


def redact_secrets(text: str) -> str:
    """`text` with every secret masked (what no output may ever carry)."""
    if not _maybe_secret(text):
        return text
    return redact(text, SECRET_KINDS)[0]


_HINT = re.compile(
    r"PRIVATE KEY|://[^\s/@]+:|eyJ|(?i:bearer)|AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|(?i:aws)|gh[pousr]_|github_pat_"
    r"|_live_|_test_|whsec_|xox|AIza|sk-|(?i:passw|pwd|api.?key|secret|token)|パスワード|暗証番号"
)


def _maybe_secret(text: str) -> bool:
    return _HINT.search(text) is not None
