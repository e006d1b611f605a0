"""Content encryption at rest (seed 003 §6.1): AES-256-GCM for item text, a keyed blind index for search.

`ContentCipher` holds a key ring: the first key encrypts, every key decrypts (so a store can
be read while `memhub encryption rotate` moves it to a new key). A value is stored as
`mhenc1:<key id>:<base64 nonce|ciphertext|tag>`, authenticated with the column's name, so a
ciphertext moved to another column does not decrypt. Text without the prefix is plaintext
written before encryption was turned on (rotation encrypts it).

Columns that are looked up by equality (a project's name, an item's tags and category, a link's
subtype) are sealed deterministically (`seal_fixed`): the nonce is a keyed hash of the column and
the text, so one text always gives one ciphertext and `WHERE name = ?` still works. This shows
which rows share a value (as the blind index does), never the value.

Search keeps working without plaintext in the file: the text index holds, instead of each
word (or CJK bigram), `HMAC-SHA256(index key, word)` truncated to 96 bits; queries are
turned into the same tokens. The index key is derived from the encrypting key, so rotating
the key rebuilds the index.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memhub.core.errors import ErrorKind, MemhubError
from memhub.core.porter import fold_word
from memhub.core.text import bigrams, is_cjk

PREFIX = "mhenc1:"
KEY_BYTES = 32
_TOKEN = re.compile(r"\S+")


def new_key() -> str:
    """A fresh key, base64 (what MEMHUB_ENCRYPTION_KEY or a key file holds)."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


def parse_key(text: str) -> bytes:
    """A base64 key of 32 bytes. Raises ValueError (never echoing the key)."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the encryption key is not base64") from None
    if len(key) != KEY_BYTES:
        raise ValueError(f"the encryption key must be {KEY_BYTES} bytes (base64 of 32 random bytes)")
    return key


def key_id(key: bytes) -> str:
    return hashlib.sha256(b"memhub-key-id" + key).hexdigest()[:8]


class ContentCipher:
    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise ValueError("a cipher needs at least one key")
        self.primary = key_id(keys[0])
        self._aead = {key_id(k): AESGCM(k) for k in keys}
        self._index_key = hmac.new(keys[0], b"memhub-blind-index-v1", hashlib.sha256).digest()
        self._fixed_key = hmac.new(keys[0], b"memhub-fixed-nonce-v1", hashlib.sha256).digest()

    def encrypt(self, text: str | None, column: str) -> str | None:
        if text is None:
            return None
        nonce = os.urandom(12)
        sealed = self._aead[self.primary].encrypt(nonce, text.encode("utf-8"), column.encode())
        return f"{PREFIX}{self.primary}:{base64.b64encode(nonce + sealed).decode()}"

    def seal_fixed(self, text: str, column: str) -> str:
        """`text` encrypted with a nonce derived from it (a synthetic IV): equal texts give equal
        ciphertexts, so the column can still be compared, indexed and kept UNIQUE."""
        data = column.encode() + b"\x00" + text.encode("utf-8")
        nonce = hmac.new(self._fixed_key, data, hashlib.sha256).digest()[:12]
        sealed = self._aead[self.primary].encrypt(nonce, text.encode("utf-8"), column.encode())
        return f"{PREFIX}{self.primary}:{base64.b64encode(nonce + sealed).decode()}"

    def decrypt(self, value: str | None, column: str) -> str | None:
        if value is None or not value.startswith(PREFIX):
            return value
        kid, _, data = value[len(PREFIX) :].partition(":")
        aead = self._aead.get(kid)
        if aead is None:
            raise MemhubError(
                ErrorKind.STORAGE, f"stored text was encrypted with a key not configured (id {kid})"
            )
        raw = base64.b64decode(data)
        try:
            return aead.decrypt(raw[:12], raw[12:], column.encode()).decode("utf-8")
        except InvalidTag:
            raise MemhubError(
                ErrorKind.STORAGE, "stored text failed authentication (wrong key or tampering)"
            ) from None

    def blind(self, token: str) -> str:
        """The index token of one word or bigram: `h` + 24 hex digits of its keyed hash. A word
        is first folded as the plain index's tokenizer folds it (diacritics off, Porter stem)."""
        if not is_cjk(token[0]):
            token = fold_word(token)
        digest = hmac.new(self._index_key, token.encode("utf-8"), hashlib.sha256).hexdigest()
        return "h" + digest[:24]

    def blind_text(self, index_text: str) -> str:
        """`core.text.index_text` output (words and CJK bigrams) as blind tokens, in order, then
        one token per distinct CJK character (after them all, so phrases of bigrams stay
        adjacent): the plain index answers a one-character query as a prefix, this one as
        "contains the character"."""
        tokens = _TOKEN.findall(index_text)
        characters = dict.fromkeys(c for token in tokens if is_cjk(token[0]) for c in token)
        return " ".join([*(self.blind(t) for t in tokens), *(self.blind("\x00" + c) for c in characters)])

    def match_term(self, term: str) -> str | None:
        """A plain search term as an FTS5 query over blind tokens (None: nothing to search)."""
        if is_cjk(term[0]):
            if len(term) == 1:
                return '"' + self.blind("\x00" + term) + '"'
            return '"' + " ".join(self.blind(b) for b in bigrams(term)) + '"'
        return '"' + self.blind(term) + '"'
