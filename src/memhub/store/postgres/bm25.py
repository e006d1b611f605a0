"""BM25 over the tsvector keyword index, computed as SQLite's FTS5 computes `bm25()`.

PostgreSQL's own `ts_rank` knows no document frequency (a word in every row weighs as much as
a rare one) and no length normalisation by the average: on the ja set it lost 0.04 hit@5 to
SQLite's BM25 (docs/benchmarks.md). So the candidates are ranked here with FTS5's formula,
k1 = 1.2, b = 0.75, per term (a word, a CJK phrase of bigrams, a one-character CJK prefix):

    idf(t) = log((N - n(t) + 0.5) / (n(t) + 0.5)), at least 1e-6
    score  = sum over t of idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

The database supplies what the formula needs: each matching row's count of each of the
query's lexemes (`ts_filter(setweight(...))` keeps only those, so little is read), its length
in tokens (`items_fts.tokens`, a generated column) and the index's row and token counts
(`items_fts_stats`, kept by a trigger; migration 0004).

A phrase (a CJK run: its bigrams at consecutive positions) counts its instances, as FTS5
does. Whether a row holds it is the database's `@@` (asked only when the query has other
terms: otherwise every row read holds it). A phrase occurs at most as often as its rarest
lexeme, so a row that holds it, where one of its lexemes is found once, holds it once;
positions are read only for lexemes found more than once in their row, and counted only
where every lexeme of the phrase was.

`n(t)`: counted among the candidates when they are every match (the usual case). When they
are only the newest matches of a very common term (store/sql/budget.py: a window of the one
statement that reads them, as on SQLite), by the database: for one term, in that same
statement (the matching ids kept once, then counted and windowed), else by `count`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat

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

    @property
    def phrase(self) -> bool:
        return not self.prefix and len(self.lexemes) > 1

    def tf(self, positions: dict[str, list[int]]) -> int:
        """Instances of the phrase: where its first lexeme is followed by the others."""
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
    prefixes = [(index, term) for index, term in enumerate(terms) if term.prefix]
    phrases = [(index, term) for index, term in enumerate(terms) if term.phrase]
    if prefixes:  # a lexeme to look for by its start: read the row's whole vector
        kept = "f.text"
        args: list[object] = []
    else:
        kept = "ts_filter(setweight(f.text, 'A', %s::text[]), '{a}')"
        args = [exact]
    words: dict[str, list[int]] = {}  # lexeme -> the one-lexeme terms it is
    for index, term in enumerate(terms):
        if not term.prefix and not term.phrase:
            words.setdefault(term.lexemes[0], []).append(index)
    # phrases (module doc): a flag per row whether it holds each, unless the query is that one
    # term; positions only of lexemes found more than once (shipping them all cost more than
    # the rest of a Japanese query's ranking)
    asked = phrases if len(terms) > 1 else []
    flags = "".join(f", w.text @@ %s::tsquery AS h{slot}" for slot in range(len(asked)))
    holds_sql = "".join(f", f.h{slot}" for slot in range(len(asked)))
    at = ", CASE WHEN array_length(u.positions, 1) > 1 THEN u.positions END" if phrases else ""
    head = f"SELECT f.item_id, f.tokens, u.lexeme, array_length(u.positions, 1) AS n{at}{holds_sql}"
    if window > 0 and len(terms) == 1:
        # One term's newest matches: the term's document frequency is its match count, which
        # the window cannot give; the matching ids are kept once (one pass over the index and
        # the rows it points to) and both the count and the window are read from them, where a
        # count of its own matched everything again (a Japanese phrase: every match rechecked).
        sql = (
            f"WITH m AS MATERIALIZED (SELECT item_id FROM items_fts WHERE text @@ %s::tsquery)"
            f" {head}, (SELECT count(*) FROM m)"
            f" FROM (SELECT item_id FROM m ORDER BY item_id DESC LIMIT {int(window)}) w"
            f" JOIN items_fts f ON f.item_id = w.item_id, unnest({kept}) u"
        )
    else:
        # the newest matches in the statement that reads them (one pass over the matches, not
        # a cutoff found by a statement of its own first)
        newest = f" ORDER BY item_id DESC LIMIT {int(window)}" if window > 0 else ""
        sql = (
            f"{head} FROM (SELECT w.item_id, w.tokens, w.text{flags} FROM"
            f" (SELECT item_id, tokens, text FROM items_fts WHERE text @@ %s::tsquery{newest}) w"
            # OFFSET 0 keeps this a subquery of its own: folded into the outer query, each flag
            # ran once for every lexeme unnested, not once a row
            f"{' OFFSET 0' if flags else ''}) f, unnest({kept}) u"
        )
    # rows as tuples: one per (matching item, lexeme), thousands for a common term, where
    # building a dict for each cost more than the loop below (docs/benchmarks.md)
    rows = (
        conn.cursor(row_factory=tuple_row)
        .execute(sql, [*(term.query for _, term in asked), expr, *args])
        .fetchall()
    )
    lengths: dict[int, int] = {}
    tfs: dict[int, dict[int, int]] = {}  # item -> term index -> tf (terms it holds only)
    counted: dict[int, dict[str, int]] = {}  # item -> lexeme -> count (for phrases and prefixes)
    placed: dict[int, dict[str, list[int]]] = {}  # item -> lexeme -> positions, where counted > 1
    holds: dict[int, tuple[bool, ...]] = {}  # item -> whether it holds each phrase `asked`
    keep_counts = bool(phrases or prefixes)
    last, counts, lexemes = None, {}, {}
    for row in rows:
        item_id, lexeme, n = row[0], row[2], row[3]
        if item_id != last:  # an item's lexemes come together (any order is counted right)
            last = item_id
            if item_id not in lengths:
                lengths[item_id] = row[1]
                if asked:
                    holds[item_id] = row[5:]
            counts = tfs.setdefault(item_id, {})
            if keep_counts:
                lexemes = counted.setdefault(item_id, {})
        for index in words.get(lexeme, ()):
            counts[index] = n
        if keep_counts:
            lexemes[lexeme] = n
            if phrases and row[4] is not None:
                placed.setdefault(item_id, {})[lexeme] = row[4]
    for index, term in prefixes:
        start = term.lexemes[0]
        for item_id, lexemes in counted.items():
            if tf := sum(n for lexeme, n in lexemes.items() if lexeme.startswith(start)):
                tfs[item_id][index] = tf
    for slot, (index, term) in enumerate(phrases):
        for item_id in counted:
            if asked and not holds[item_id][slot]:  # else every row read holds the one term
                continue
            once = min(map(counted[item_id].get, term.lexemes, repeat(0))) <= 1
            tfs[item_id][index] = 1 if once else max(1, term.tf(placed.get(item_id, {})))
    if window <= 0 or len(tfs) < window:  # every match is a candidate: count them here
        matches = [0] * len(terms)
        for counts in tfs.values():
            for index in counts:
                matches[index] += 1
    elif len(terms) == 1:
        matches = [int(rows[0][-1])]  # the statement counted them
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
