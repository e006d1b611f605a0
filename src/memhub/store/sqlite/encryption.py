"""The SQLite side of content encryption (store/crypto.py): the connections' `mh_plain` function,
the start-up key check, and key rotation.

With a cipher the writer connection runs `PRAGMA secure_delete = ON`, so text that is overwritten or
deleted (plaintext from before encryption, ciphertext of an old key) is zeroed in the file
rather than left in free pages; rotation ends with VACUUM and a WAL truncation for the same
reason.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from memhub.core.errors import ErrorKind, MemhubError
from memhub.store.crypto import PREFIX, ContentCipher
from memhub.store.sqlite import sealing
from memhub.store.sqlite.tx import SqliteTx

BATCH = 1_000
_ENCRYPTED = f"substr(body, 1, {len(PREFIX)}) = '{PREFIX}'"


def register(conn: sqlite3.Connection, cipher_of: Callable[[], ContentCipher | None]) -> None:
    """Register `mh_plain(text)` (substring search over encrypted text) on a connection. The
    cipher is looked up on every call, so a connection opened before a key rotation decrypts
    with the new key after it; every connection of a store (the writer and each reader) gets it."""

    def plain(value: str | None) -> str | None:
        cipher = cipher_of()
        return cipher.decrypt(value, "norm_text") if cipher is not None else value

    conn.create_function("mh_plain", 1, plain, deterministic=True)


def check_key(conn: sqlite3.Connection, cipher: ContentCipher | None) -> None:
    """Refuse a store whose text this key cannot read (or plaintext given a key), at start-up."""
    row = conn.execute(f"SELECT body FROM items WHERE {_ENCRYPTED} LIMIT 1").fetchone()
    if row is None:  # no item yet: project names are sealed too
        row = conn.execute(
            f"SELECT name FROM projects WHERE substr(name, 1, {len(PREFIX)}) = '{PREFIX}' LIMIT 1"
        ).fetchone()
    if cipher is None:
        if row is not None:
            raise MemhubError(
                ErrorKind.STORAGE,
                "this store is encrypted: set MEMHUB_ENCRYPTION_KEY or MEMHUB_ENCRYPTION_KEY_FILE",
            )
        return
    conn.execute("PRAGMA secure_delete = ON")
    if row is not None:
        # a wrong key fails here, at start-up, not on a read
        cipher.decrypt(row[0], "body" if row.keys()[0] == "body" else "project_name")
    plain_rows = conn.execute(f"SELECT 1 FROM items WHERE NOT {_ENCRYPTED} AND body != '' LIMIT 1").fetchone()
    if plain_rows is not None:
        # a key given to a store that holds plaintext: the old rows would stay readable in the
        # file and fall out of keyword search (queries become blind tokens)
        raise MemhubError(
            ErrorKind.STORAGE,
            "this store holds unencrypted items: encrypt them first with `memhub encryption rotate`",
        )
    sealing.seal_leftovers(conn, cipher)  # attributes, tags, names left in clear by an older memhub


def rotate(
    conn: sqlite3.Connection,
    ring: ContentCipher,
    new: ContentCipher | None,
    now: str,
    audit: Callable[[SqliteTx], object] | None = None,
) -> int:
    """Re-encrypt every item's text with `new` (None: store it as plaintext), reading it with
    `ring` (every key it may be under), and rebuild the text index; one transaction (with
    `audit`'s event: both or neither), then VACUUM. Returns the number of items rewritten."""
    conn.execute("BEGIN IMMEDIATE")
    done = last = 0
    try:
        while True:
            rows = conn.execute(
                "SELECT id, title, body, norm_text FROM items WHERE id > ? ORDER BY id LIMIT ?", (last, BATCH)
            ).fetchall()
            if not rows:
                break
            conn.executemany(
                "UPDATE items SET title = ?, body = ?, norm_text = ? WHERE id = ?",
                [
                    (
                        _seal(new, ring.decrypt(row[1], "title"), "title"),
                        _seal(new, ring.decrypt(row[2], "body"), "body"),
                        _seal(new, ring.decrypt(row[3], "norm_text"), "norm_text"),
                        row[0],
                    )
                    for row in rows
                ],
            )
            done += len(rows)
            last = rows[-1][0]
        sealing.reseal(conn, ring, new)  # attributes, tags, names
        SqliteTx(conn, now, cipher=new).reindex_text()
        # active contexts are short-lived caches of claim text under the old key: drop them
        conn.execute("DELETE FROM pce_active_contexts")
        conn.execute("INSERT INTO items_fts(items_fts) VALUES ('optimize')")  # drop the old segments
        if audit is not None:
            audit(SqliteTx(conn, now, write=True, cipher=new))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    check_key(conn, new)
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return done


def _seal(cipher: ContentCipher | None, text: str | None, column: str) -> str | None:
    return cipher.encrypt(text, column) if cipher is not None else text
