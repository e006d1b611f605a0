"""Encryption of the columns around an item's text (store/crypto.py): its attributes, tags and
category, project names and descriptions, session names, link subtypes.

`SEALED` (store/sql/sealing.py) lists them, with how one value is sealed and opened.

`reseal` rewrites them all from one key ring to a new cipher (or to plaintext) — `memhub
encryption rotate` calls it; `seal_leftovers` encrypts what a store encrypted by an older
memhub (which sealed only titles and bodies) still holds in clear, once, at start-up.
"""

from __future__ import annotations

import json
import sqlite3

from memhub.store.crypto import PREFIX, ContentCipher
from memhub.store.sql.sealing import BY_AAD, SEALED, Column, seal, seal_json, unseal

BATCH = 1_000
__all__ = ["BY_AAD", "SEALED", "Column", "reseal", "seal", "seal_json", "seal_leftovers", "unseal"]


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
