"""BM25 retrieval whose cost stays bounded as the store grows.

FTS5 computes BM25 for every row matching a query before it can keep the best few, so a
query term found in 25,000 of 100,000 memories costs ~100 ms, most of it spent ranking rows
that a rarer term of the same query already outranks. `bounded_match` keeps the number of
rows ranked near `budget`
(the algorithm is store/sql/budget.py, shared with PostgreSQL):

1. the whole OR expression matches at most `budget` rows (a count reads only doclists,
   ~1 ms): rank them all, exactly as before;
2. otherwise drop the most frequent terms (BM25 gives them the least weight: their IDF is
   lowest) until the rarer ones match at most `budget` rows, always keeping the rarest;
3. if even that is too many (one very common term), rank only its `budget` newest matches.

"Its newest matches" is a window of the ranking statement itself (`ORDER BY rowid DESC LIMIT
budget` under the BM25 sort: `bm25()` runs on those rows only), not a rowid found first by a
statement of its own: one pass over the matches instead of two (a Japanese run's phrase
~1.3 ms less at 100k, docs/benchmarks.md).

Ranking then runs in FTS5 alone and visibility is checked on the best rows afterwards, in the
same statement (the ranked rows joined with `items`; `text_search` widens until enough pass),
instead of joining every matching row first.
Counts and cutoffs are over the whole store, so the rarer terms' matches may be too few for
the viewer (or the project, or the kinds asked for): `text_search` then ranks the newest
`budget` matches of every term too and merges both lists. Kinds with few items (`rare_kinds`)
are ranked on their own rows only, so a search for claims does not wade through memories.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Literal

from memhub.core.text import bigrams, is_cjk, search_terms
from memhub.store.sql.budget import bounded

# A search for kinds with at most this many items (claims, decisions, topics beside 100k
# memories) ranks only their rows, one rowid lookup each (~0.1-0.2 ms), instead of widening
# through the matches of every kind (100k memories: ~85 ms, whatever the kind holds)
RARE_KIND_ROWS = 256


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def match_term(term: str) -> str:
    """One plain term (core.text.search_terms) as an FTS5 query: a word quoted, a CJK run as
    the phrase of its bigrams (the index holds CJK text as bigrams), one CJK character as a
    prefix (any bigram starting with it)."""
    if is_cjk(term[0]):
        return _quote(term) + " *" if len(term) == 1 else _quote(" ".join(bigrams(term)))
    return _quote(term)


def match_query(query: str, *, mode: Literal["any", "all"] = "any", max_terms: int = 32) -> str | None:
    """A safe FTS5 MATCH expression for a user's `query`, or None when it has no searchable term.

    `any` ORs the terms (ranked retrieval: BM25 rewards documents matching more of them);
    `all` ANDs them. Stopwords are dropped in `any` mode unless nothing else is left.
    """
    terms = search_terms(query, drop_stopwords=(mode == "any"), max_terms=max_terms)
    if not terms:
        return None
    return (" OR " if mode == "any" else " AND ").join(match_term(t) for t in terms)


def _count(conn: sqlite3.Connection, expr: str, cap: int) -> int:
    """Rows matching `expr`: one token (a word) in full, anything else up to `cap`.

    A word's count reads its doclist alone, ~30 ns a row here, where stopping at a cap costs
    ~45 ns a row (a `LIMIT` subquery): counted in full it was never slower over the bench's
    queries (two common words took 0.3-2 ms longer counted to the cap and then further). A
    phrase (a CJK run's bigrams) is matched at every row its bigrams share, microseconds a
    row: counted to `cap`, FTS5 stops there (`Count` allows a count past the cap)."""
    args: list[object]
    if " " not in expr and not expr.endswith("*"):
        sql, args = "SELECT count(*) FROM items_fts WHERE items_fts MATCH ?", [expr]
    else:
        sql = "SELECT count(*) FROM (SELECT 1 FROM items_fts WHERE items_fts MATCH ? LIMIT ?)"
        args = [expr, cap]
    return int(conn.execute(sql, args).fetchone()[0])


def bounded_match(conn: sqlite3.Connection, terms: Sequence[str], budget: int) -> tuple[str, int]:
    """(MATCH expression OR-ing some of `terms`, `newest`) scoring ~`budget` rows: `newest` 0
    ranks every match of the expression, n > 0 its n newest (`ranked_sql`: a window of the
    ranking statement, so no statement of its own finds where they start)."""
    return bounded(terms, budget, lambda expr, cap: _count(conn, expr, cap), " OR ".join)


def rare_kinds(conn: sqlite3.Connection, kinds: Sequence[str]) -> bool:
    """Whether the items of `kinds` are few enough (at most `RARE_KIND_ROWS`) to rank only
    them, one index lookup each, instead of ranking matches of every kind and filtering."""
    if not kinds:
        return False
    marks = ", ".join("?" * len(kinds))
    sql = f"SELECT count(*) FROM (SELECT 1 FROM items WHERE kind IN ({marks}) LIMIT ?)"
    return int(conn.execute(sql, [*kinds, RARE_KIND_ROWS + 1]).fetchone()[0]) <= RARE_KIND_ROWS


def ranked_sql(expr: str, newest: int, limit: int, kinds: Sequence[str] = ()) -> tuple[str, list[object]]:
    """The best `limit` BM25 rows (columns rowid, score: relevance >= 0, higher is better)
    among the matches of `expr` (with `newest` > 0, its `newest` newest matches only; all of
    them when fewer match), and with `kinds` only items of those kinds (for
    `rare_kinds`; BM25 is the same, its statistics are the whole index's): a statement to
    join with the items it names."""
    only = ""
    args: list[object] = [expr]
    if kinds:
        only = f" AND rowid IN (SELECT id FROM items WHERE kind IN ({', '.join('?' * len(kinds))}))"
        args.extend(kinds)
    # ordered by the selected column, one expression for the sort and the result (the same
    # rows in the same order as `ORDER BY bm25(items_fts)`, ~5 % less time: docs/benchmarks.md)
    scored = f"SELECT rowid, -bm25(items_fts) AS score FROM items_fts WHERE items_fts MATCH ?{only}"
    if newest > 0 and kinds:  # these kinds' rows among the newest matches of every kind
        scored += (
            " AND rowid >= coalesce((SELECT rowid FROM items_fts WHERE items_fts MATCH ?"
            " ORDER BY rowid DESC LIMIT 1 OFFSET ?), 0)"
        )
        args.extend([expr, newest - 1])
    elif newest > 0:  # bm25() is computed for these rows only
        scored = f"SELECT rowid, score FROM ({scored} ORDER BY rowid DESC LIMIT ?)"
        args.append(newest)
    return f"{scored} ORDER BY score DESC, rowid LIMIT ?", [*args, limit]  # ties: the oldest first
