"""Keyword engines beside the shipped FTS5 search: their speed on a seeded store, and exactness.

    PYTHONPATH=src .venv/bin/python bench/keyword_engines.py \
        --db /tmp/seeded/assoc-100000-e5+use.db [--rounds 5] [--engines shipped,numpy]
    PYTHONPATH=src /tmp/tvenv/bin/python bench/keyword_engines.py \
        --db /tmp/seeded/assoc-100000-e5+use.db --engines tantivy   # a venv with tantivy + numpy

Opens a database seeded by bench/assoc_latency.py (`--seeded DIR` keeps one) read-only
(`file:...?mode=ro`: no write, no checkpoint; only the -shm file's read marks, as any
reader's) and answers the assoc benchmark's queries (bench/text_budget.py's list), `--rounds`
times, with each engine:

- shipped: `Tx.text_search` as bench/text_budget.py times it (200 memories, search_terms without
  split_cjk, each call in its own read transaction), on a connection set up as the store's
  readers are, but opened read-only (SqliteStore itself opens a writer and migrates). FTS5's
  `bm25()` over at most TEXT_BUDGET (3,000) matching rows per query (store/sql/budget.py).
- numpy: exact FTS5 BM25 over EVERY matching row, computed in numpy from FTS5's own tokens:
  the `fts5vocab` instance table (term, doc, offset) loaded into postings (CSR by term, one
  int64 key per instance: doc index << 20 | offset). Each term becomes fts.match_term's query (a
  word, a phrase of CJK bigrams, a one-character CJK prefix), tokenised by a private FTS5 table
  with the same tokenizer; a phrase matches where its tokens sit at consecutive offsets, a
  prefix every token starting with it; FTS5's formula (store/postgres/bm25.py); the best 200 by
  score, then rowid. Timed: tokenising, matching, scoring every match and the top 200.
  Checked against FTS5's unbounded `-bm25(items_fts)` of every matching row: the same rowids,
  the largest |score difference|, and whether the top 200 (score desc, rowid) is the same list.
- tantivy (only where `import tantivy` works; not a memhub dependency): an in-RAM index of
  `SELECT rowid, text FROM items_fts` (the index text: words and CJK bigrams separated by
  spaces) with the `whitespace` tokenizer and positions; the query the OR of `"word"` and
  `"b1 b2 b3"` phrases (a one-character CJK term as the bare character: an exact token, not a
  prefix); timed: `searcher.search(query, 200)` (the parsed query is built before). Reported:
  overlap@200 with the exact top 200 (numpy's when it ran in the same process, else FTS5's
  unbounded ranking, which the numpy check shows to be the same list).

Only sqlite3, numpy, bench/corpus.py and memhub.core.text are needed for numpy and tantivy
(fts.py is loaded from its file when memhub.store.sqlite's dependencies are missing), so the
tantivy engine runs in a throwaway venv. Results are merged into --out, keyed by database file
name and engine.

Caveats: the seeded corpus repeats 2,000 texts, so every query term matches thousands of rows
and many rows tie (identical texts score identically: overlap@200 among ties is arbitrary for
tantivy). tantivy's BM25 is not FTS5's: no porter stemming under `whitespace` ("deploys" does
not match "deploy"), its own idf (ln(1 + (N - n + 0.5) / (n + 0.5))) and field norms quantised
to a byte, so its ranking differs by design. shipped ranks 3,000 rows at most and filters by
visibility; numpy and tantivy rank every matching row of the index, with no visibility.
"""

from __future__ import annotations

import argparse
import bisect
import importlib.util
import json
import math
import os
import platform
import resource
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memhub
from corpus import QUERIES
from memhub.core.text import bigrams, is_cjk, search_terms

RESULTS = Path(__file__).resolve().parent / "results"
ENGINES = ("shipped", "numpy", "tantivy")
LIMIT = 200  # memories the keyword side asks for (assoc's search)
TOKENIZE = "porter unicode61 remove_diacritics 2"  # items_fts's tokenizer (migrations)
K1, B, MIN_IDF = 1.2, 0.75, 1e-6  # FTS5's bm25() (store/postgres/bm25.py)
SHIFT = 20  # postings key: doc index << SHIFT | offset
MAX_OFFSET = 1 << (SHIFT - 1)  # a phrase's later tokens, shifted back, never reach another doc


def _match_term() -> Callable[[str], str]:
    """fts.match_term; fts.py loaded from its file when memhub.store.sqlite's package cannot be
    imported (its SqliteStore needs cryptography and more: a venv with tantivy and numpy only)."""
    try:
        from memhub.store.sqlite.fts import match_term

        return match_term
    except ImportError:
        path = Path(memhub.__file__).resolve().parent / "store" / "sqlite" / "fts.py"
        spec = importlib.util.spec_from_file_location("keyword_engines_fts", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found: Callable[[str], str] = module.match_term
        return found


match_term = _match_term()


def connect(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db.resolve()}?mode=ro", uri=True)


def quantiles(times: list[float]) -> dict[str, float]:
    """p50 / p95 as bench/text_budget.py takes them."""
    ordered = sorted(times)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
    }


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def expression(terms: Sequence[str]) -> str:
    return " OR ".join(match_term(t) for t in terms)


# --- shipped: Tx.text_search ---------------------------------------------------------------


def shipped(db: Path, queries: list[list[str]], rounds: int) -> dict[str, Any]:
    from memhub.core.clock import SystemClock, isoformat
    from memhub.core.models import Principal
    from memhub.services import access
    from memhub.store.sql.budget import TEXT_BUDGET
    from memhub.store.sqlite import encryption
    from memhub.store.sqlite.database import _PRAGMAS, READER_CACHE_KIB
    from memhub.store.sqlite.tx import SqliteTx

    # a store reader (SqliteStore._connect(read=True)), opened read-only
    conn = sqlite3.connect(f"file:{db.resolve()}?mode=ro", uri=True, isolation_level=None)
    conn.row_factory = sqlite3.Row
    for pragma in _PRAGMAS:
        conn.execute(pragma)
    conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
    conn.execute("PRAGMA query_only = ON")
    encryption.register(conn, lambda: None)
    clock = SystemClock()

    def tx() -> SqliteTx:
        return SqliteTx(conn, isoformat(clock.now()), write=False)

    actor = Principal(id="bench", default_project="bench")
    conn.execute("BEGIN")
    viewer = access.viewer(tx(), actor, sessions="current")
    conn.execute("COMMIT")
    times: list[float] = []
    for _ in range(rounds):
        for terms in queries:
            conn.execute("BEGIN")
            reading = tx()
            started = time.perf_counter()
            reading.text_search(viewer, terms, ("memory",), None, LIMIT)
            times.append((time.perf_counter() - started) * 1000)
            conn.execute("COMMIT")
    conn.close()
    return {**quantiles(times), "budget_rows": TEXT_BUDGET}


# --- numpy: exact BM25 from FTS5's tokens --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Phrase:
    """One match_term query as FTS5 reads it: tokens at consecutive offsets, the last one a
    prefix when `prefix`."""

    tokens: tuple[str, ...]
    prefix: bool


class Tokenizer:
    """Tokens of a text as items_fts's tokenizer makes them: a private in-memory FTS5 table and
    its fts5vocab instance table, read in offset order."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self.conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize = '{TOKENIZE}')")
        self.conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")

    def __call__(self, text: str) -> tuple[str, ...]:
        self.conn.execute("DELETE FROM t")
        self.conn.execute("INSERT INTO t(rowid, text) VALUES (1, ?)", [text])
        return tuple(r[0] for r in self.conn.execute("SELECT term FROM v ORDER BY offset"))

    def phrase(self, term: str) -> Phrase:
        """match_term(term) (`"..."` or `"..." *`, quotes doubled inside) as a Phrase."""
        query = match_term(term)
        prefix = query.endswith(" *")
        inner = query[1:-3] if prefix else query[1:-1]
        return Phrase(self(inner.replace('""', '"')), prefix)


class Postings:
    """FTS5's index as numpy arrays: `keys[indptr[i]:indptr[i + 1]]` are the instances of
    `terms[i]` (terms in FTS5's order, which is str order), ascending; doc index d is the
    row `rowids[d]` of `lengths[d]` tokens."""

    def __init__(self, conn: sqlite3.Connection, chunk: int = 500_000) -> None:
        conn.execute("CREATE VIRTUAL TABLE temp.vr USING fts5vocab(main, items_fts, row)")
        conn.execute("CREATE VIRTUAL TABLE temp.vi USING fts5vocab(main, items_fts, instance)")
        rows = conn.execute("SELECT term, cnt FROM temp.vr").fetchall()  # cnt: instances
        self.terms: list[str] = [r[0] for r in rows]
        self.index = {t: i for i, t in enumerate(self.terms)}
        self.indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows)), out=self.indptr[1:])
        total = int(self.indptr[-1])
        docs = np.empty(total, dtype=np.int64)
        offsets = np.empty(total, dtype=np.int32)
        at = 0
        cur = conn.execute("SELECT doc, offset FROM temp.vi")  # by term, then doc, then offset
        while block := cur.fetchmany(chunk):
            pairs = np.array(block, dtype=np.int64)
            docs[at : at + len(pairs)] = pairs[:, 0]
            offsets[at : at + len(pairs)] = pairs[:, 1]
            at += len(pairs)
        assert at == total, (at, total)
        assert total == 0 or int(offsets.max()) < MAX_OFFSET
        top = int(docs.max()) if total else 0
        if top < 2**26:  # a bool per rowid (64 MiB at most) maps rowids to doc indexes: no sort
            present = np.zeros(top + 1, dtype=bool)
            present[docs] = True
            self.rowids = np.flatnonzero(present)
            dense = (np.cumsum(present) - 1)[docs]
            del present
        else:
            self.rowids, dense = np.unique(docs, return_inverse=True)
        del docs
        self.lengths = np.bincount(dense, minlength=len(self.rowids)).astype(np.float64)
        self.n = len(self.rowids)
        self.avgdl = float(total) / float(self.n)
        self.keys = (dense.astype(np.int64) << SHIFT) | offsets
        del dense, offsets
        # the instance table's rows line up with the row table's counts: every term's keys ascend
        rising = np.diff(self.keys) > 0
        rising[self.indptr[1:-1][self.indptr[1:-1] > 0] - 1] = True  # a new term may start lower
        assert bool(rising.all()), "fts5vocab row and instance tables disagree"
        self.instances = total

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.indptr.nbytes + self.rowids.nbytes + self.lengths.nbytes

    def _keys(self, token: str, prefix: bool) -> np.ndarray:
        """The ascending keys of `token`'s instances (with `prefix`, of every token starting
        with it: contiguous in the CSR, as the terms are sorted)."""
        if not prefix:
            i = self.index.get(token)
            return self.keys[0:0] if i is None else self.keys[self.indptr[i] : self.indptr[i + 1]]
        lo = hi = bisect.bisect_left(self.terms, token)
        while hi < len(self.terms) and self.terms[hi].startswith(token):
            hi += 1
        found = self.keys[self.indptr[lo] : self.indptr[hi]]
        return np.sort(found) if hi - lo > 1 else found

    def matches(self, phrase: Phrase) -> tuple[np.ndarray, np.ndarray]:
        """(doc indexes ascending, tf): the phrase's starts counted per doc."""
        if not phrase.tokens:
            return self.keys[0:0], self.keys[0:0]
        last = len(phrase.tokens) - 1
        # each token's keys moved back to the phrase's start, the rarest first
        at = sorted(
            (self._keys(t, phrase.prefix and j == last) - j for j, t in enumerate(phrase.tokens)), key=len
        )
        starts = at[0]
        for other in at[1:]:
            if not len(starts) or not len(other):
                return self.keys[0:0], self.keys[0:0]
            i = np.minimum(np.searchsorted(other, starts), len(other) - 1)
            starts = starts[other[i] == starts]
        docs = starts >> SHIFT
        first = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]]) if len(docs) else np.empty(0, np.int64)
        tf = np.diff(np.r_[first, len(docs)])
        return docs[first], tf

    def bm25(self, phrases: Sequence[Phrase]) -> tuple[np.ndarray, np.ndarray]:
        """(doc indexes ascending, FTS5 bm25 relevance) of every doc matching any phrase."""
        score = np.zeros(self.n)
        hit = np.zeros(self.n, dtype=bool)
        for phrase in phrases:
            docs, tf = self.matches(phrase)
            nhit = len(docs)
            idf = math.log((self.n - nhit + 0.5) / (nhit + 0.5))  # libm's, as FTS5's
            idf = idf if idf > 0.0 else MIN_IDF
            freq = tf.astype(np.float64)
            dl = self.lengths[docs]
            score[docs] += idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1.0 - B + B * dl / self.avgdl)))
            hit[docs] = True
        docs = np.flatnonzero(hit)
        return docs, score[docs]

    def top(self, docs: np.ndarray, scores: np.ndarray, limit: int) -> np.ndarray:
        """The rowids of the best `limit` docs: score descending, then rowid ascending."""
        if len(docs) > limit:
            floor = np.partition(scores, len(scores) - limit)[len(scores) - limit]
            keep = scores >= floor  # every tie at the floor: the rowids decide among them
            docs, scores = docs[keep], scores[keep]
        rowids: np.ndarray = self.rowids[docs]
        ordered: np.ndarray = rowids[np.lexsort((rowids, -scores))]
        return ordered[:limit]


def numpy_engine(
    conn: sqlite3.Connection, queries: list[list[str]], rounds: int
) -> tuple[dict[str, Any], list[list[int]]]:
    """Its report, and its top 200 rowids per query."""
    rss_before = peak_rss_mib()
    started = time.perf_counter()
    postings = Postings(conn)
    load_s = time.perf_counter() - started
    rss_loaded = peak_rss_mib()
    tokenizer = Tokenizer()
    times: list[float] = []
    tokenising: list[float] = []
    tops: list[list[int]] = []
    for r in range(rounds):
        for terms in queries:
            started = time.perf_counter()
            phrases = [tokenizer.phrase(t) for t in terms]
            tokenised = time.perf_counter()
            docs, scores = postings.bm25(phrases)
            best = postings.top(docs, scores, LIMIT)
            ended = time.perf_counter()
            times.append((ended - started) * 1000)
            tokenising.append((tokenised - started) * 1000)
            if r == 0:
                tops.append(best.tolist())
    # exactness: FTS5's own bm25() of every matching row
    same_sets = same_top = 0
    worst = 0.0
    differing: list[str] = []
    for query, terms, top in zip(QUERIES, queries, tops, strict=True):
        expr = expression(terms)
        reference = dict(
            conn.execute("SELECT rowid, -bm25(items_fts) FROM items_fts WHERE items_fts MATCH ?", [expr])
        )
        docs, scores = postings.bm25([tokenizer.phrase(t) for t in terms])
        mine = dict(zip(postings.rowids[docs].tolist(), scores.tolist(), strict=True))
        if mine.keys() == reference.keys():
            same_sets += 1
        else:
            differing.append(f"{query}: {len(mine)} rows, FTS5 {len(reference)}")
        common = mine.keys() & reference.keys()
        worst = max([worst, *(abs(mine[k] - reference[k]) for k in common)])
        ordered = sorted(reference.items(), key=lambda hit: (-hit[1], hit[0]))[:LIMIT]
        same_top += [rowid for rowid, _ in ordered] == top
    report = {
        **quantiles(times),
        "tokenise_p50_ms": quantiles(tokenising)["p50_ms"],
        "load_s": round(load_s, 2),
        "instances": postings.instances,
        "terms": len(postings.terms),
        "docs": postings.n,
        "postings_mib": round(postings.nbytes / 2**20, 1),
        "peak_rss_mib_before_load": rss_before,
        "peak_rss_mib": rss_loaded,
        "same_rowid_sets": same_sets,
        "same_top200": same_top,
        "max_abs_score_diff": worst,
        "differing": differing,
    }
    return report, tops


# --- tantivy -------------------------------------------------------------------------------


def tantivy_query(terms: Sequence[str]) -> str:
    parts = []
    for term in terms:
        if is_cjk(term[0]):
            parts.append('"' + " ".join(bigrams(term)) + '"' if len(term) > 1 else term)
        else:
            parts.append('"' + term.replace('"', "") + '"')
    return " OR ".join(parts)


def tantivy_engine(
    conn: sqlite3.Connection, queries: list[list[str]], rounds: int, exact: list[list[int]] | None
) -> dict[str, Any]:
    import tantivy  # type: ignore[import-not-found, unused-ignore]

    started = time.perf_counter()
    rows = conn.execute("SELECT rowid, text FROM items_fts").fetchall()
    read_s = time.perf_counter() - started
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=False, tokenizer_name="whitespace", index_option="position")
    builder.add_integer_field("id", stored=True, indexed=False, fast=True)
    index = tantivy.Index(builder.build())  # in RAM
    started = time.perf_counter()
    writer = index.writer(heap_size=100_000_000, num_threads=1)
    for rowid, text in rows:
        writer.add_document(tantivy.Document(id=rowid, text=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    build_s = time.perf_counter() - started
    del rows
    searcher = index.searcher()
    parsed = [index.parse_query(tantivy_query(terms), ["text"]) for terms in queries]
    times: list[float] = []
    for _ in range(rounds):
        for query in parsed:
            started = time.perf_counter()
            searcher.search(query, LIMIT)
            times.append((time.perf_counter() - started) * 1000)
    if exact is None:  # FTS5's unbounded ranking (the numpy engine's, exactly)
        exact = [
            [
                r[0]
                for r in conn.execute(
                    "SELECT rowid, -bm25(items_fts) AS s FROM items_fts WHERE items_fts MATCH ?"
                    " ORDER BY s DESC, rowid LIMIT ?",
                    [expression(terms), LIMIT],
                )
            ]
            for terms in queries
        ]
        against = "FTS5 unbounded bm25()"
    else:
        against = "numpy exact"
    overlaps = []
    for query, best in zip(parsed, exact, strict=True):
        hits = searcher.search(query, LIMIT).hits
        ids = {searcher.doc(address)["id"][0] for _, address in hits}
        overlaps.append(len(ids & set(best)) / len(best) if best else 1.0)
    return {
        **quantiles(times),
        "read_s": round(read_s, 2),
        "build_s": round(build_s, 2),
        "segments": searcher.num_segments,
        "peak_rss_mib": peak_rss_mib(),
        "overlap_at_200": round(statistics.mean(overlaps), 3),
        "overlap_min": round(min(overlaps), 3),
        "overlap_against": against,
    }


# --- the run ---------------------------------------------------------------------------------


def available(engine: str) -> bool:
    if engine == "tantivy":
        return importlib.util.find_spec("tantivy") is not None
    if engine == "shipped":
        try:
            import memhub.store.sqlite  # noqa: F401
        except ImportError:
            return False
    return True


def line(engine: str, r: dict[str, Any]) -> str:
    head = f"{engine:<8}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}"
    if engine == "shipped":
        return f"{head}   FTS5 bm25() over <= {r['budget_rows']:,} rows, 200 memories"
    if engine == "numpy":
        return (
            f"{head}   load {r['load_s']:.2f} s, postings {r['postings_mib']:.1f} MiB"
            f" ({r['instances']:,} instances, {r['terms']:,} terms, {r['docs']:,} docs),"
            f" peak RSS {r['peak_rss_mib']:.0f} MiB (before load {r['peak_rss_mib_before_load']:.0f});"
            f" tokenising p50 {r['tokenise_p50_ms']:.3f} ms;"
            f" exact: same rowids {r['same_rowid_sets']}/{len(QUERIES)},"
            f" max |score diff| {r['max_abs_score_diff']:.1e}, same top 200 {r['same_top200']}/{len(QUERIES)}"
        )
    return (
        f"{head}   build {r['build_s']:.2f} s (+ read {r['read_s']:.2f} s), {r['segments']} segments,"
        f" peak RSS {r['peak_rss_mib']:.0f} MiB; overlap@200 {r['overlap_at_200']:.3f}"
        f" (min {r['overlap_min']:.3f}) vs {r['overlap_against']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", required=True, type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--engines", help=f"comma-separated, of {','.join(ENGINES)} (default: all available)")
    parser.add_argument("--out", type=Path, default=RESULTS / "keyword_engines.json")
    args = parser.parse_args()
    if args.engines:
        engines = [e.strip() for e in args.engines.split(",") if e.strip()]
        unknown = [e for e in engines if e not in ENGINES]
        missing = [e for e in engines if e in ENGINES and not available(e)]
        if unknown or missing:
            parser.error(f"unknown engines {unknown}, not importable here {missing}")
    else:
        engines = [e for e in ENGINES if available(e)]
    queries = [search_terms(q) for q in QUERIES]
    conn = connect(args.db)
    results: dict[str, dict[str, Any]] = {}
    exact: list[list[int]] | None = None
    print(f"{args.db.name}: {len(QUERIES)} queries x {args.rounds} rounds, top {LIMIT}")
    print(f"{'engine':<8}{'p50 ms':>9}{'p95 ms':>9}")
    for engine in engines:
        if engine == "shipped":
            results[engine] = shipped(args.db, queries, args.rounds)
        elif engine == "numpy":
            results[engine], exact = numpy_engine(conn, queries, args.rounds)
        else:
            results[engine] = tantivy_engine(conn, queries, args.rounds, exact)
        print(line(engine, results[engine]), flush=True)
        for differs in results[engine].get("differing", []):
            print(f"    rowids differ: {differs}")
    conn.close()
    try:
        import tantivy  # type: ignore[import-not-found, unused-ignore]

        tantivy_version = getattr(tantivy, "__version__", "?")
    except ImportError:
        tantivy_version = None
    report: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    for engine, result in results.items():
        report.setdefault(args.db.name, {})[engine] = {
            **result,
            "queries": len(QUERIES),
            "rounds": args.rounds,
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "numpy": np.__version__,
            **({"tantivy": tantivy_version} if engine == "tantivy" else {}),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
