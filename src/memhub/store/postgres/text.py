"""The keyword index on PostgreSQL: the same tokens as SQLite's FTS5 index, as a tsvector.

`core.text.index_text` gives the words and CJK bigrams; each word is folded here as FTS5's
`porter unicode61 remove_diacritics 2` tokenizer folds it (`core.porter.fold_word`), and the
tokens are written as an explicit tsvector literal (`'token':position …`), so no PostgreSQL
text-search configuration re-parses or re-stems them. A search term becomes a tsquery the
same way: a word is one folded lexeme, a CJK run the phrase of its bigrams (`<->`), one CJK
character a prefix (`:*`). Nothing a user types is ever tsquery syntax: every lexeme is
quoted.
"""

from __future__ import annotations

from collections.abc import Sequence

from memhub.core.porter import fold_word
from memhub.core.text import bigrams, index_text, is_cjk
from memhub.store.postgres.bm25 import Term

MAX_LEXEME_BYTES = 2_046  # PostgreSQL refuses longer lexemes (to_tsvector skips them too)
MAX_POSITION = 16_383  # positions past it are stored as it (PostgreSQL's own limit)
MAX_POSITIONS_PER_LEXEME = 255


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _fold(token: str) -> str:
    return token if is_cjk(token[0]) else fold_word(token)


def _fits(lexeme: str) -> bool:
    return bool(lexeme) and "\x00" not in lexeme and len(lexeme.encode("utf-8")) <= MAX_LEXEME_BYTES


def tsvector(title: str | None, body: str, tags: Sequence[str]) -> str:
    """The tsvector literal an item's row of `items_fts` holds."""
    positions: dict[str, list[int]] = {}
    for position, token in enumerate(index_text(title, body, " ".join(tags)).split(), start=1):
        lexeme = _fold(token)
        if _fits(lexeme):
            seen = positions.setdefault(lexeme, [])
            if len(seen) < MAX_POSITIONS_PER_LEXEME:
                seen.append(min(position, MAX_POSITION))
    return " ".join(
        f"{_quote(lexeme)}:{','.join(map(str, sorted(set(at))))}" for lexeme, at in positions.items()
    )


def tsquery(term: str) -> str | None:
    """One plain term (core.text.search_terms) as a tsquery (None: nothing to search)."""
    if not term:
        return None
    if is_cjk(term[0]):
        if len(term) == 1:
            return f"{_quote(term)}:*"
        return " <-> ".join(_quote(b) for b in bigrams(term) if _fits(b)) or None
    lexeme = _fold(term)
    return _quote(lexeme) if _fits(lexeme) else None


def term(plain: str) -> Term | None:
    """One plain term as `tsquery` makes it, in the form BM25 ranks it (store/postgres/bm25.py)."""
    query = tsquery(plain)
    if query is None:
        return None
    if is_cjk(plain[0]):
        if len(plain) == 1:
            return Term(query, (plain,), prefix=True)
        return Term(query, tuple(b for b in bigrams(plain) if _fits(b)))
    return Term(query, (_fold(plain),))


def any_of(queries: Sequence[str]) -> str:
    """The tsquery matching any of `queries`, each once (one of them: itself, so its match
    count, taken once by the ranking budget, is found again by BM25's document frequencies)."""
    distinct = list(dict.fromkeys(queries))
    if len(distinct) == 1:
        return distinct[0]
    return " | ".join(f"({q})" for q in distinct)
