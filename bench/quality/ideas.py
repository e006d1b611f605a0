"""Issue 23, second round: variants of the conversation-context rerank screened offline (not
part of the product). Builds on bench/quality/lab.py (same cached candidates and formula).

    .venv/bin/python bench/quality/ideas.py [--only NAME,...]

(a) a second hop / diversity in the final top-k, (b) a context share that depends on the query
or on the candidates, (c) a query-dependent fusion weight, (d) pseudo-relevance feedback on the
keyword side; each printed as lab.table rows (LoCoMo categories 1-4 and the ja set).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore import Bm25, cache_path, corpora
from lab import Q, _adaptive_rel, build, evaluate, neighbour, parts, table

from memhub.core.text import search_terms

Scorer = Callable[[Q], tuple[np.ndarray, np.ndarray | None]]


@cache
def passages(dataset: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per corpus, its memories' (e5, USE) passage vectors."""
    e5p, usp = np.load(cache_path("e5", dataset, "p")), np.load(cache_path("use", dataset, "p"))
    out, p0 = [], 0
    for c in corpora(dataset):
        n = len(c.memories)
        out.append((e5p[p0 : p0 + n], usp[p0 : p0 + n]))
        p0 += n
    return out


@cache
def texts(dataset: str) -> list[list[str]]:
    return [[t for _, t in c.memories] for c in corpora(dataset)]


@cache
def bm25s(dataset: str) -> list[Bm25]:
    return [Bm25(ts) for ts in texts(dataset)]


DATASET: dict[int, str] = {}  # id(q) -> dataset, filled by main


def rel_of(q: Q, alpha: float | None = 0.5) -> np.ndarray:
    return _adaptive_rel(q, alpha)


def cand_mask(q: Q) -> np.ndarray:
    m = np.zeros(len(q.cos), bool)
    m[q.cand] = True
    return m


def lend(rel: np.ndarray, q: Q, share: float | np.ndarray) -> np.ndarray:
    """Production's lending over candidates (non-candidates lend 0), not divided (order only)."""
    r = np.where(cand_mask(q), rel, 0.0)
    return rel + share * neighbour(r, q)


# -- (b) shares that depend on the query or the candidates ------------------------------------


def need(s1: float, s2: float, alpha: float | None = 0.5) -> Scorer:
    """share s1 of the best neighbour, plus s2 of how much the neighbour exceeds the candidate."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        rel = rel_of(q, alpha)
        nb = neighbour(np.where(cand_mask(q), rel, 0.0), q)
        return rel + s1 * nb + s2 * np.maximum(0.0, nb - rel), None

    return f


def gap_gated(lo: float, hi: float, gap: float, alpha: float | None = 0.5) -> Scorer:
    """share `hi` unless the best candidate leads the second by more than `gap` (then `lo`)."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        rel = rel_of(q, alpha)
        top = np.sort(rel[q.cand])[::-1]
        g = top[0] - top[1] if len(top) > 1 else 1.0
        return lend(rel, q, lo if g > gap else hi), None

    return f


def coverage_gated(lo: float, hi: float, cut: float = 1.0, alpha: float | None = 0.5) -> Scorer:
    """share `hi` when no candidate contains `cut` of the query's terms, else `lo`."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        rel = rel_of(q, alpha)
        tm = q.bm25 > 0
        best = float(q.cover[tm].max()) if tm.any() else 0.0
        return lend(rel, q, hi if best < cut else lo), None

    return f


def own_gated(lo: float, hi: float, frac: float, alpha: float | None = 0.5) -> Scorer:
    """per candidate: share `hi` when its own relevance is under `frac` of the query's best
    relevance (it needs context to be found), else `lo`."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        rel = rel_of(q, alpha)
        best = float(rel[q.cand].max())
        share = np.where(rel < frac * best, hi, lo)
        return lend(rel, q, share), None

    return f


def pair_gated(lo: float, hi: float, cut: float, alpha: float | None = 0.5, above: bool = True) -> Scorer:
    """per candidate: share `hi` when the passage cosine (e5+use) of the candidate and its
    best neighbour is above (or below) `cut`."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        rel = rel_of(q, alpha)
        e5, use = passages(DATASET[id(q)])[q.conv]
        r = np.where(cand_mask(q), rel, 0.0)
        a = np.where(q.prev >= 0, r[np.maximum(q.prev, 0)], 0.0)
        b = np.where(q.nxt >= 0, r[np.maximum(q.nxt, 0)], 0.0)
        best = np.where(a >= b, q.prev, q.nxt)
        bi = np.maximum(best, 0)
        pc = 0.75 * np.einsum("ij,ij->i", e5, e5[bi]) + 0.25 * np.einsum("ij,ij->i", use, use[bi])
        hit = pc > cut if above else pc < cut
        share = np.where(best >= 0, np.where(hit, hi, lo), 0.0)
        return rel + share * np.maximum(a, b), None

    return f


def length_gated(lo: float, hi: float, words: int, alpha: float | None = 0.5) -> Scorer:
    """per candidate: share `hi` when the memory has at most `words` index terms."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        rel = rel_of(q, alpha)
        n = lengths(DATASET[id(q)])[q.conv]
        return lend(rel, q, np.where(n <= words, hi, lo)), None

    return f


@cache
def lengths(dataset: str) -> list[np.ndarray]:
    from memhub.core.text import index_terms

    return [np.array([len(index_terms(t)) for t in ts]) for ts in texts(dataset)]


# -- (a) second hop and diversity -------------------------------------------------------------


def diverse(share: float, penalty: float, alpha: float | None = 0.5, k: int = 10) -> Scorer:
    """Lending, then a greedy top-k where a candidate whose best neighbour is already chosen
    loses `penalty` of what it borrowed (it was found through a turn that is already shown)."""

    def f(q: Q) -> tuple[np.ndarray, np.ndarray]:
        rel = rel_of(q, alpha)
        r = np.where(cand_mask(q), rel, 0.0)
        nb = neighbour(r, q)
        s = rel + share * nb
        pool = list(q.cand)
        chosen: list[int] = []
        for _ in range(min(k, len(pool))):
            cur = {
                i: s[i] - (penalty * share * nb[i] if (q.prev[i] in chosen or q.nxt[i] in chosen) else 0.0)
                for i in pool
            }
            best = max(cur, key=lambda i: (cur[i], i))
            chosen.append(best)
            pool.remove(best)
        out = np.full(len(q.cos), -1e9)
        for rank_, i in enumerate(chosen):
            out[i] = 1e3 - rank_
        return out, np.array(chosen)

    return f


def mmr(share: float, lam: float, alpha: float | None = 0.5, k: int = 10, depth: int = 30) -> Scorer:
    """Lending, then MMR: the next result maximises score − lam · max passage cosine (e5+use,
    above the unrelated level) to the ones already chosen."""

    def f(q: Q) -> tuple[np.ndarray, np.ndarray]:
        rel = rel_of(q, alpha)
        s = lend(rel, q, share)
        e5, use = passages(DATASET[id(q)])[q.conv]
        top = q.cand[np.lexsort((-q.cand, -s[q.cand]))[:depth]]
        sim = 0.75 * e5[top] @ e5[top].T + 0.25 * use[top] @ use[top].T
        sim = np.clip((sim - 0.64) / (1 - 0.64), 0, 1)
        chosen: list[int] = []
        left = list(range(len(top)))
        while left and len(chosen) < k:

            def val(j: int) -> float:
                red = max((sim[j, c] for c in chosen), default=0.0)
                return float(s[top[j]] - lam * red)

            j = max(left, key=val)
            chosen.append(j)
            left.remove(j)
        out = np.full(len(q.cos), -1e9)
        for rank_, j in enumerate(chosen):
            out[top[j]] = 1e3 - rank_
        return out, top[chosen]

    return f


def rocchio(share: float, beta: float, m: int = 3, alpha: float | None = 0.5, scope: str = "cand") -> Scorer:
    """Vector pseudo-relevance feedback: the query vector plus `beta` × the mean of the first
    `m` results' vectors (after lending); candidates re-scored with the new cosine (min-max
    anchored like production), then lent again. scope "cand": only the first-stage candidates;
    "all": any memory (a second vector search)."""

    def f(q: Q) -> tuple[np.ndarray, np.ndarray | None]:
        rel = rel_of(q, alpha)
        s = lend(rel, q, share)
        top = q.cand[np.argsort(-s[q.cand], kind="stable")[:m]]
        e5, use = passages(DATASET[id(q)])[q.conv]
        fb = 0.75 * (e5 @ e5[top].mean(0)) + 0.25 * (use @ use[top].mean(0))
        cos2 = (q.cos + beta * fb) / (1 + beta)
        mask = cand_mask(q) if scope == "cand" else np.ones(len(q.cos), bool)
        cv = cos2[mask]
        floor = min(0.61, float(cv.min()))
        v2 = np.where(mask, np.clip((cos2 - floor) / (float(cv.max()) - floor), 0, 1), 0.0)
        _, t = parts(q)
        a = 0.5 if alpha is None else alpha
        rel2 = a * v2 + (1 - a) * t
        r2 = np.where(mask, rel2, 0.0)
        pool = None if scope == "cand" else np.flatnonzero(mask)
        return rel2 + share * neighbour(r2, q), pool

    return f


# -- (d) keyword pseudo-relevance feedback ----------------------------------------------------


def prf_keywords(share: float, n_terms: int, weight: float, m: int = 3, alpha: float | None = 0.5) -> Scorer:
    """BM25 re-run with the query plus the `n_terms` terms most frequent in the first `m`
    results that the query lacks; the second BM25 (min-max over its matches) is added with
    `weight` to the text side of candidates."""
    from collections import Counter

    from memhub.core.text import index_terms

    def f(q: Q) -> tuple[np.ndarray, None]:
        ds = DATASET[id(q)]
        rel = rel_of(q, alpha)
        s = lend(rel, q, share)
        top = q.cand[np.argsort(-s[q.cand], kind="stable")[:m]]
        ts = texts(ds)[q.conv]
        have = set(search_terms(QTEXT[id(q)]))
        counts: Counter[str] = Counter()
        for i in top:
            counts.update(set(index_terms(ts[i])) - have)
        common = _df(ds)[q.conv]
        ranked = sorted(counts.items(), key=lambda x: (-x[1], common.get(x[0], 0)))
        extra = [w for w, _ in ranked if len(w) > 2][:n_terms]
        if not extra:
            return s, None
        sc = bm25s(ds)[q.conv].scores(" ".join(extra), 200)
        b2 = np.zeros(len(q.cos))
        for i, v in sc.items():
            b2[i] = v
        mk = cand_mask(q)
        hi = float(b2[mk].max())
        t2 = np.where(mk, b2 / hi, 0.0) if hi > 0 else 0 * b2
        rel2 = rel + weight * t2
        return rel2 + share * neighbour(np.where(mk, rel2, 0.0), q), None

    return f


@cache
def _df(dataset: str) -> list[dict[str, int]]:
    from collections import Counter

    from memhub.core.text import index_terms

    out = []
    for ts in texts(dataset):
        c: Counter[str] = Counter()
        for t in ts:
            c.update(set(index_terms(t)))
        out.append(dict(c))
    return out


# -- (c) query-dependent fusion -----------------------------------------------------------------


def agreement(share: float, lo: float, hi: float, top: int = 10) -> Scorer:
    """vector weight `hi` when the two lists' first `top` share nothing, `lo` when they agree
    (linear in the overlap)."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        v, t = parts(q)
        tv = set(np.argsort(-v, kind="stable")[:top].tolist())
        tt = set(np.argsort(-t, kind="stable")[:top].tolist())
        o = len(tv & tt) / top
        a = hi + (lo - hi) * o
        return lend(a * v + (1 - a) * t, q, share), None

    return f


def cjk_alpha(share: float, a_latin: float, a_cjk: float, cover_rule: bool = False) -> Scorer:
    """vector weight by the query's script (CJK queries lean on vectors)."""
    from memhub.core.text import is_cjk

    def f(q: Q) -> tuple[np.ndarray, None]:
        v, t = parts(q)
        qt = QTEXT[id(q)]
        a = a_cjk if any(is_cjk(ch) for ch in qt) else a_latin
        if cover_rule:
            tm = q.bm25 > 0
            if (float(q.cover[tm].max()) if tm.any() else 0.0) < 0.5:
                a = max(a, 0.7)
        return lend(a * v + (1 - a) * t, q, share), None

    return f


QTEXT: dict[int, str] = {}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--ja-only", action="store_true")
    args = parser.parse_args()
    ja = build("ja")
    loc = ja if args.ja_only else build("locomo")
    for ds, qs in (("locomo", loc), ("ja", ja)) if not args.ja_only else (("ja", ja),):
        questions = [x for c in corpora(ds) for x in c.questions]
        for q, x in zip(qs, questions, strict=True):
            DATASET[id(q)] = ds
            QTEXT[id(q)] = x.text
    v: dict[str, Scorer] = {}
    for s in (0.2, 0.3, 0.5):
        v[f"share {s}"] = lambda q, s=s: (lend(rel_of(q), q, s), None)
        v[f"share {s} adaptive-alpha"] = lambda q, s=s: (lend(rel_of(q, None), q, s), None)
    for s1, s2 in ((0.2, 0.2), (0.2, 0.4), (0.1, 0.4), (0.2, 0.8), (0.3, 0.3)):
        v[f"need {s1}+{s2}"] = need(s1, s2)
    for lo, hi, g in ((0.2, 0.5, 0.05), (0.2, 0.5, 0.1), (0.2, 0.5, 0.2), (0.1, 0.5, 0.1), (0.2, 0.3, 0.1)):
        v[f"gap {lo}/{hi} >{g}"] = gap_gated(lo, hi, g)
    for lo, hi, cut in ((0.2, 0.5, 1.0), (0.2, 0.5, 0.75), (0.2, 0.4, 0.99)):
        v[f"cover-gated {lo}/{hi} <{cut}"] = coverage_gated(lo, hi, cut)
    for lo, hi, fr in ((0.2, 0.5, 0.8), (0.2, 0.5, 0.6), (0.1, 0.5, 0.8), (0.2, 0.8, 0.7)):
        v[f"own-gated {lo}/{hi} <{fr}"] = own_gated(lo, hi, fr)
    for lo, hi, cut, above in ((0.2, 0.5, 0.7, True), (0.2, 0.5, 0.75, True), (0.2, 0.5, 0.7, False)):
        v[f"pair-gated {lo}/{hi} {'>' if above else '<'}{cut}"] = pair_gated(lo, hi, cut, above=above)
    for lo, hi, w in ((0.2, 0.5, 12), (0.2, 0.5, 20), (0.2, 0.5, 30)):
        v[f"length-gated {lo}/{hi} <={w}"] = length_gated(lo, hi, w)
    for pen in (0.5, 1.0):
        v[f"diverse 0.2 pen {pen}"] = diverse(0.2, pen)
        v[f"diverse 0.5 pen {pen}"] = diverse(0.5, pen)
    for lam in (0.1, 0.2, 0.4):
        v[f"mmr 0.2 lam {lam}"] = mmr(0.2, lam)
    for beta, m in ((0.3, 1), (0.3, 3), (0.6, 3), (0.2, 3)):
        v[f"rocchio 0.2 b{beta} m{m}"] = rocchio(0.2, beta, m)
        v[f"rocchio 0.2 b{beta} m{m} all"] = rocchio(0.2, beta, m, scope="all")
    for n, w in ((5, 0.1), (5, 0.2), (10, 0.1), (10, 0.2)):
        v[f"prf kw 0.2 n{n} w{w}"] = prf_keywords(0.2, n, w)
    for lo, hi in ((0.4, 0.6), (0.4, 0.7), (0.45, 0.65)):
        v[f"agreement 0.2 {lo}/{hi}"] = agreement(0.2, lo, hi)
    for al, ac in ((0.4, 0.6), (0.45, 0.6), (0.4, 0.5), (0.5, 0.6)):
        v[f"cjk-alpha 0.2 {al}/{ac}"] = cjk_alpha(0.2, al, ac)
        v[f"cjk-alpha 0.3 {al}/{ac}"] = cjk_alpha(0.3, al, ac)
    for sh in (0.2, 0.25, 0.3):
        for lam in (0.05, 0.1, 0.15, 0.2):
            v[f"combo adaptive {sh} mmr {lam}"] = mmr(sh, lam, alpha=None)
    v["combo adaptive 0.2 mmr 0.1 depth 15"] = mmr(0.2, 0.1, alpha=None, depth=15)
    v["combo adaptive 0.2 mmr 0.1 depth 50"] = mmr(0.2, 0.1, alpha=None, depth=50)
    only = [s for s in args.only.split(",") if s]
    for name, f in v.items():
        if only and not any(o in name for o in only):
            continue
        if args.ja_only:
            j = evaluate(ja, f)
            a = j["all"]
            groups = " ".join(f"{g}:{j[g]['hit@5']:.3f}" for g in ("ja", "en", "cross"))
            print(
                f"{name:30s} ja h1 {a['hit@1']:.3f} h5 {a['hit@5']:.3f} mrr {a['mrr']:.3f} {groups}",
                flush=True,
            )
        else:
            print(table(name, evaluate(loc, f), evaluate(ja, f)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
