"""A password's value may hold accented, symbol or Japanese characters: all of it is masked
(the value class was printable ASCII, which left `€xyz` and `pässwörd…` in clear). Kana and
kanji still end a value: after `パスワードは` they are the sentence going on."""

from __future__ import annotations

import pytest

from memhub.policy.redact import classify, redact_secrets, scan


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("password: Tr0ub4dor&3€xyz secret", "Tr0ub4dor&3€xyz"),
        ("password=pässwörd12345", "pässwörd12345"),
    ],
)
def test_a_non_ascii_password_is_masked_whole(text: str, secret: str) -> None:
    shown = redact_secrets(text)
    assert secret not in shown and "[REDACTED:" in shown
    for part in (secret[: len(secret) // 2], secret[len(secret) // 2 :]):
        assert part not in shown
    assert classify(scan(text)) == "secret"
