"""Encryption of the columns around an item's text (store/crypto.py): its attributes, tags and
category, project names and descriptions, session names, link subtypes.

`SEALED` lists them: each column is either sealed with a random nonce (read only whole) or
deterministically (`fixed`: compared in SQL, so equal texts must give equal ciphertexts). The
associated data is the column's `aad` name, so a value moved to another column does not open.

`reseal` rewrites them all from one key ring to a new cipher (or to plaintext) — `memhub
encryption rotate` calls it; `seal_leftovers` encrypts what a store encrypted by an older
memhub (which sealed only titles and bodies) still holds in clear, once, at start-up.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from memhub.store.crypto import PREFIX, ContentCipher

BATCH = 1_000


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


def _plain_left(conn: sqlite3.Connection, column: Column) -> bool:
    row = conn.execute(
        f"SELECT 1 FROM {column.table} WHERE {column.name} IS NOT NULL"
        f" AND substr({column.name}, 1, {len(PREFIX)}) != '{PREFIX}' LIMIT 1"
    ).fetchone()
    return row is not None


def reseal(conn: sqlite3.Connection, ring: ContentCipher, new: ContentCipher | None) -> int:
    """Rewrite every `SEALED` column: read with `ring` (plaintext passes), write with `new`.
    Runs inside the caller's transaction. Returns the number of values rewritten."""
    done = 0
    for column in SEALED:
        if column.table == "item_tags":
            continue  # rebuilt from items.tags below
        key = "rowid"
        last = -1
        while True:
            rows = conn.execute(
                f"SELECT {key}, {column.name} FROM {column.table} WHERE {key} > ?"
                f" AND {column.name} IS NOT NULL ORDER BY {key} LIMIT ?",
                (last, BATCH),
            ).fetchall()
            if not rows:
                break
            conn.executemany(
                f"UPDATE {column.table} SET {column.name} = ? WHERE {key} = ?",
                [(seal(new, ring.decrypt(r[1], column.aad), column.aad), r[0]) for r in rows],
            )
            done += len(rows)
            last = rows[-1][0]
    conn.execute("DELETE FROM item_tags")
    last = 0
    while True:
        rows = conn.execute(
            "SELECT id, tags FROM items WHERE id > ? ORDER BY id LIMIT ?", (last, BATCH)
        ).fetchall()
        if not rows:
            break
        conn.executemany(
            "INSERT OR IGNORE INTO item_tags(item_id, tag) VALUES (?, ?)",
            [
                (r[0], seal(new, str(tag), "tag"))
                for r in rows
                for tag in json.loads(unseal(new, r[1], "tags") or "[]")
            ],
        )
        last = rows[-1][0]
    return done


def seal_leftovers(conn: sqlite3.Connection, cipher: ContentCipher) -> bool:
    """Encrypt the `SEALED` columns of a store whose text is encrypted but whose other columns
    were written in clear (by a memhub before they were sealed). True when it rewrote any."""
    if not any(_plain_left(conn, column) for column in SEALED):
        return False
    conn.execute("BEGIN IMMEDIATE")
    try:
        reseal(conn, cipher, cipher)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True
