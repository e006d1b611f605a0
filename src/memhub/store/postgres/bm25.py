"""BM25 over the tsvector keyword index, computed as SQLite's FTS5 computes `bm25()`.

PostgreSQL's own `ts_rank` knows no document frequency (a word in every row weighs as much as
a rare one) and no length normalisation by the average: on the ja set it lost 0.04 hit@5 to
SQLite's BM25 (docs/benchmarks.md). So the candidates are ranked here with FTS5's formula,
k1 = 1.2, b = 0.75, per term (a word, a CJK phrase of bigrams, a one-character CJK prefix):

    idf(t) = log((N - n(t) + 0.5) / (n(t) + 0.5)), at least 1e-6
    score  = sum over t of idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

The database supplies what the formula needs: each matching row's positions of the query's
lexemes (`ts_filter(setweight(...))` keeps only those, so little is read), its length in
tokens (`items_fts.tokens`, a generated column) and the index's row and token counts
(`items_fts_stats`, kept by a trigger; migration 0004). A phrase's tf is counted from the
positions (its bigrams at consecutive positions), as FTS5 counts phrase instances. `n(t)`:
counted among the candidates when they are every match (the usual case); when the
candidates are only the newest matches of a very common term (store/sql/budget.py: a window
of the one statement that reads them, as on SQLite), by the database (`count`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from psycopg import Connection
from psycopg.rows import DictRow, tuple_row

K1 = 1.2
B = 0.75
MIN_IDF = 1e-6


@dataclass(frozen=True, slots=True)
class Term:
    """One search term as the index holds it: lexemes at consecutive positions (one for a
    word), or, with `prefix`, any lexeme starting with the one given."""

    query: str  # its tsquery (store/postgres/text.py), for counting its matches
    lexemes: tuple[str, ...]
    prefix: bool = False

    def tf(self, positions: dict[str, list[int]]) -> int:
        if self.prefix:
            start = self.lexemes[0]
            return sum(len(at) for lexeme, at in positions.items() if lexeme.startswith(start))
        first = positions.get(self.lexemes[0])
        if not first:
            return 0
        rest = [set(positions.get(lexeme, ())) for lexeme in self.lexemes[1:]]
        if any(not at for at in rest):
            return 0
        return sum(1 for p in first if all(p + offset in at for offset, at in enumerate(rest, start=1)))


def ranked(
    conn: Connection[DictRow], terms: Sequence[Term], expr: str, window: int, count: Callable[[str], int]
) -> list[tuple[int, float]]:
    """(item id, BM25 > 0) of every row matching `expr` (the OR of `terms`), or of its `window`
    newest when `window` > 0, best first, ties by id."""
    if not terms:
        return []
    stats = conn.execute("SELECT rows, tokens FROM items_fts_stats WHERE id = 1").fetchone()
    total = int(stats["rows"]) if stats else 0
    avgdl = int(stats["tokens"]) / total if stats and total else 1.0
    exact = sorted({lexeme for term in terms if not term.prefix for lexeme in term.lexemes})
    prefixes = sorted({term.lexemes[0] for term in terms if term.prefix})
    if prefixes:  # a lexeme to look for by its start: read the row's whole vector
        kept = "f.text"
        args: list[object] = []
    else:
        kept = "ts_filter(setweight(f.text, 'A', %s::text[]), '{a}')"
        args = [exact]
    words: dict[str, list[int]] = {}  # lexeme -> the one-lexeme terms it is
    others = []  # phrases and prefixes: counted from positions
    for index, term in enumerate(terms):
        if term.prefix or len(term.lexemes) > 1:
            others.append((index, term))
        else:
            words.setdefault(term.lexemes[0], []).append(index)
    positions = ", u.positions" if others else ""
    # the newest matches in the statement that reads them (one pass over the matches, not a
    # cutoff found by a statement of its own first)
    newest = f" ORDER BY item_id DESC LIMIT {int(window)}" if window > 0 else ""
    # rows as tuples: one per (matching item, lexeme), thousands for a common term, where
    # building a dict for each cost more than the loop below (docs/benchmarks.md)
    rows = (
        conn.cursor(row_factory=tuple_row)
        .execute(
            f"SELECT f.item_id, f.tokens, u.lexeme, array_length(u.positions, 1) AS n{positions}"
            f" FROM (SELECT item_id, tokens, text FROM items_fts WHERE text @@ %s::tsquery{newest}) f,"
            f" unnest({kept}) u",
            [expr, *args],
        )
        .fetchall()
    )
    lengths: dict[int, int] = {}
    tfs: dict[int, dict[int, int]] = {}  # item -> term index -> tf (terms it holds only)
    held: dict[int, dict[str, list[int]]] = {}
    for row in rows:
        item_id, lexeme = row[0], row[2]
        counts = tfs.get(item_id)
        if counts is None:
            lengths[item_id] = row[1]
            counts = tfs[item_id] = {}
        for index in words.get(lexeme, ()):
            counts[index] = row[3]
        if others:
            held.setdefault(item_id, {})[lexeme] = row[4]
    for index, term in others:
        for item_id, at in held.items():
            if tf := term.tf(at):
                tfs[item_id][index] = tf
    if window <= 0 or len(tfs) < window:  # every match is a candidate: count them here
        matches = [0] * len(terms)
        for counts in tfs.values():
            for index in counts:
                matches[index] += 1
    else:
        matches = [count(term.query) for term in terms]
    idf = [max(MIN_IDF, math.log((total - n + 0.5) / (n + 0.5))) for n in matches]
    scored = []
    for item_id, counts in tfs.items():
        norm = K1 * (1 - B + B * lengths[item_id] / avgdl)
        score = sum(idf[index] * tf * (K1 + 1) / (tf + norm) for index, tf in counts.items())
        if score > 0:
            scored.append((item_id, score))
    scored.sort(key=lambda hit: (-hit[1], hit[0]))
    return scored
