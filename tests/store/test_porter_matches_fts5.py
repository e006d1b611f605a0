"""core/porter.py stems exactly as SQLite's FTS5 `porter` tokenizer (the encrypted store's blind
index depends on it): checked against SQLite itself on every word of the docs and sources."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from memhub.core.porter import porter_stem

REPO = Path(__file__).resolve().parents[2]


def test_same_stems_as_sqlite() -> None:
    text = " ".join(
        p.read_text(encoding="utf-8") for p in [*REPO.glob("docs/*.md"), *REPO.glob("src/**/*.py")]
    )
    words = sorted(
        set(re.findall(r"[a-z]{3,}", text.lower())) | {"notes", "not", "running", "generalization"}
    )
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(t, tokenize = 'porter ascii')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    conn.executemany("INSERT INTO f(rowid, t) VALUES (?, ?)", list(enumerate(words, 1)))
    sqlite_stems = {row[0]: row[1] for row in conn.execute("SELECT doc, term FROM v")}
    wrong = [
        (w, sqlite_stems[i], porter_stem(w))
        for i, w in enumerate(words, 1)
        if sqlite_stems[i] != porter_stem(w)
    ]
    assert len(words) > 2000 and wrong == []
    assert porter_stem("Notes") == "Notes" and porter_stem("café") == "café"  # only lowercase ASCII words
