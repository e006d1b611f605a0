"""Sealed columns: the columns around an item's text that an encrypted store keeps encrypted
(store/crypto.py) — its attributes, tags and category, project names and descriptions, session
names, link subtypes — and how a value is sealed and opened. Pure: shared by the SQL backends
(store/sqlite/sealing.py re-encrypts stores; a backend without a cipher stores plaintext).

`SEALED` lists them: each column is either sealed with a random nonce (read only whole) or
deterministically (`fixed`: compared in SQL, so equal texts must give equal ciphertexts). The
associated data is the column's `aad` name, so a value moved to another column does not open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from memhub.store.crypto import ContentCipher


@dataclass(frozen=True, slots=True)
class Column:
    table: str
    name: str
    aad: str  # the associated data of its ciphertexts
    fixed: bool  # deterministic: compared, indexed or UNIQUE in SQL


SEALED = (
    Column("items", "attrs", "attrs", False),
    Column("items", "tags", "tags", False),
    Column("items", "category", "category", True),
    Column("item_tags", "tag", "tag", True),
    Column("projects", "name", "project_name", True),
    Column("projects", "description", "project_description", False),
    Column("projects", "attrs", "project_attrs", False),
    Column("sessions", "name", "session_name", False),
    Column("links", "subtype", "link_subtype", True),
)
BY_AAD = {column.aad: column for column in SEALED}


def seal(cipher: ContentCipher | None, text: str | None, aad: str) -> str | None:
    """A value of one of the `SEALED` columns as stored (plaintext without a cipher)."""
    if cipher is None or text is None:
        return text
    return cipher.seal_fixed(text, aad) if BY_AAD[aad].fixed else cipher.encrypt(text, aad)


def unseal(cipher: ContentCipher | None, value: str | None, aad: str) -> str | None:
    return cipher.decrypt(value, aad) if cipher is not None else value


def seal_json(cipher: ContentCipher | None, value: object, aad: str) -> str:
    return seal(cipher, json.dumps(value, ensure_ascii=False), aad) or ""
