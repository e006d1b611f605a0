"""Offline lab for the ranking of `memory(action="search")` (issue 23; not part of the product).

    .venv/bin/python bench/quality/explore.py embed --model e5 ; ... --model use   # cache vectors
    .venv/bin/python bench/quality/lab.py [--only NAME,...]

Rebuilds, per question, what the production rerank sees (the 200 best BM25 and the 200 best
cosines of the project, the e5+use cosine being 0.75 e5 + 0.25 USE), scores the production
formula (`ranking.relevance`, coverage included) and variants of it over cached embeddings in
seconds, on LoCoMo categories 1-4 and on the ja set. Neighbours are what production's
temporal links give: the previous and next memory stored in the same session (LoCoMo: one
session per LoCoMo session, the ja set: one session). Learned variants are trained on some
LoCoMo conversations and scored on the others (5 folds by conversation), then trained on all
of LoCoMo and scored on the ja set.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore import Bm25, cache_path, corpora
from run import Tally, score_ranking

from memhub.core.text import term_coverage
from memhub.services.assoc.ranking import MINMAX_TEXT, UNRELATED_COSINE

K = 200
W_E5 = 0.75


@dataclass
class Q:
    """One question's candidates (indices into its corpus) and their raw features."""

    conv: int
    groups: tuple[str, ...]
    gold: set[int]
    cand: np.ndarray  # candidate memory indices
    cos: np.ndarray  # joined cosine (all memories of the corpus)
    cos_e5: np.ndarray
    cos_use: np.ndarray
    vmask: np.ndarray  # vector candidate (bool, all memories)
    bm25: np.ndarray  # raw BM25 (0 = not a text candidate), all memories
    cover: np.ndarray  # coverage of text candidates (all memories; 1.0 elsewhere unused)
    prev: np.ndarray  # index of the previous memory in the session, -1 none (all memories)
    nxt: np.ndarray


def build(dataset: str) -> list[Q]:
    """The questions' candidates, cached in bench/results/ (building LoCoMo takes minutes)."""
    path = cache_path("lab", dataset, "q").with_suffix(".pickle")
    if path.exists():
        return pickle.loads(path.read_bytes())  # our own cache
    qs = _build(dataset)
    path.write_bytes(pickle.dumps(qs))
    return qs


def _build(dataset: str) -> list[Q]:
    cs = corpora(dataset)
    e5p, e5q = np.load(cache_path("e5", dataset, "p")), np.load(cache_path("e5", dataset, "q"))
    usp, usq = np.load(cache_path("use", dataset, "p")), np.load(cache_path("use", dataset, "q"))
    out: list[Q] = []
    p0 = q0 = 0
    for ci, c in enumerate(cs):
        n = len(c.memories)
        keys = [k for k, _ in c.memories]
        texts = [t for _, t in c.memories]
        index = {k: i for i, k in enumerate(keys)}
        sess = [k.split(":")[0] if dataset == "locomo" else "s" for k in keys]
        prev = np.array([i - 1 if i > 0 and sess[i - 1] == sess[i] else -1 for i in range(n)])
        nxt = np.array([i + 1 if i + 1 < n and sess[i + 1] == sess[i] else -1 for i in range(n)])
        bm = Bm25(texts)
        for qi, q in enumerate(c.questions):
            ce5 = e5p[p0 : p0 + n] @ e5q[q0 + qi]
            cus = usp[p0 : p0 + n] @ usq[q0 + qi]
            cos = W_E5 * ce5 + (1 - W_E5) * cus
            vmask = np.zeros(n, bool)
            vmask[np.argsort(-cos, kind="stable")[:K]] = True
            bm25 = np.zeros(n)
            for i, s in bm.scores(q.text, K).items():
                bm25[i] = s
            share = term_coverage(q.text)
            cover = np.ones(n)
            for i in np.flatnonzero(bm25 > 0):
                cover[i] = share(texts[i])
            cand = np.flatnonzero(vmask | (bm25 > 0))
            out.append(
                Q(
                    ci,
                    q.groups,
                    {index[g] for g in q.gold},
                    cand,
                    cos,
                    ce5,
                    cus,
                    vmask,
                    bm25,
                    cover,
                    prev,
                    nxt,
                )
            )
        p0 += n
        q0 += len(c.questions)
    return out


def parts(q: Q) -> tuple[np.ndarray, np.ndarray]:
    """Production's (vector part, text part) over all memories (0 for non-candidates)."""
    cv = q.cos[q.vmask]
    floor = min(UNRELATED_COSINE["e5+use"], float(cv.min()))
    best = float(cv.max())
    v = np.where(q.vmask, np.clip((q.cos - floor) / (best - floor), 0, 1), 0.0) if best > floor else 0 * q.cos
    t = np.zeros_like(q.cos)
    tm = q.bm25 > 0
    if tm.any():
        scores = q.bm25[tm]
        hi, lo = float(scores.max()), float(scores.min())
        if tm.sum() < MINMAX_TEXT:
            lo = min(lo, hi / 2)
        t[tm] = (np.clip((scores - lo) / (hi - lo), 0, 1) if hi > lo else 1.0) * q.cover[tm]
    return v, t


def neighbour(x: np.ndarray, q: Q, how: str = "max") -> np.ndarray:
    a = np.where(q.prev >= 0, x[np.maximum(q.prev, 0)], 0.0)
    b = np.where(q.nxt >= 0, x[np.maximum(q.nxt, 0)], 0.0)
    if how == "max":
        return np.maximum(a, b)
    if how == "prev":
        return a
    if how == "next":
        return b
    return (a + b) / 2


Scorer = Callable[[Q], np.ndarray]


def rank(score: np.ndarray, q: Q, pool: np.ndarray | None = None) -> list[int]:
    """Top 10 of `pool` (default the candidates) by score desc, newest (higher index) first on ties."""
    idx = q.cand if pool is None else pool
    s = score[idx]
    order = np.lexsort((-idx, -s))
    return [int(i) for i in idx[order[:10]]]


def evaluate(
    qs: Sequence[Q], scorer: Callable[[Q], tuple[np.ndarray, np.ndarray | None]]
) -> dict[str, dict[str, float]]:
    tally = Tally()
    for q in qs:
        score, pool = scorer(q)
        tally.add(q.groups, score_ranking(rank(score, q, pool), q.gold))
    return tally.means()


def baseline(q: Q, alpha: float = 0.5) -> tuple[np.ndarray, None]:
    v, t = parts(q)
    return alpha * v + (1 - alpha) * t, None


def smooth(
    beta: float, how: str = "max", expand: bool = False, alpha: float = 0.5
) -> Callable[[Q], tuple[np.ndarray, np.ndarray | None]]:
    def f(q: Q) -> tuple[np.ndarray, np.ndarray | None]:
        v, t = parts(q)
        rel = alpha * v + (1 - alpha) * t
        s = rel + beta * neighbour(rel, q, how)
        if not expand:
            return s, None
        pool = np.union1d(q.cand, np.concatenate([q.prev[q.cand], q.nxt[q.cand]]))
        return s, pool[pool >= 0]

    return f


def smooth_cos(beta: float, alpha: float = 0.5) -> Callable[[Q], tuple[np.ndarray, None]]:
    """Neighbour smoothing on the raw cosine of every neighbour (not only candidates)."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        v, t = parts(q)
        cv = q.cos[q.vmask]
        floor = min(UNRELATED_COSINE["e5+use"], float(cv.min()))
        vall = np.clip((q.cos - floor) / (float(cv.max()) - floor), 0, 1)
        rel = alpha * v + (1 - alpha) * t
        return rel + beta * alpha * neighbour(vall, q), None

    return f


def features(q: Q) -> tuple[np.ndarray, list[str]]:
    """Per candidate of `q` (rows in q.cand order): cheap features a rerank could read."""
    v, t = parts(q)
    rel = 0.5 * v + 0.5 * t
    c = q.cand
    tm = (q.bm25 > 0).astype(float)

    def mm(x: np.ndarray) -> np.ndarray:
        y = x[c]
        lo, hi = float(y.min()), float(y.max())
        return (x - lo) / (hi - lo) if hi > lo else 0 * x

    e5, use = mm(q.cos_e5), mm(q.cos_use)
    cols = {
        "v": v,
        "t": t,
        "rel": rel,
        "cover": np.where(tm > 0, q.cover, 0.0),
        "tmask": tm,
        "e5": e5,
        "use": use,
        "nb_rel": neighbour(rel, q),
        "nb_v": neighbour(v, q),
        "nb_t": neighbour(t, q),
        "nb_e5": neighbour(e5, q),
        "rel_x_nb": rel * neighbour(rel, q),
    }
    names = list(cols)
    return np.stack([cols[k][c] for k in names], axis=1), names


def fit_lr(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, steps: int = 400) -> np.ndarray:
    """Logistic regression (bias last), positives weighted to balance, full-batch Newton-free GD."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    pos = max(1.0, float(y.sum()))
    sw = np.where(y > 0, (len(y) - pos) / pos, 1.0)
    sw /= sw.mean()
    lr = 1.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(xb @ w)))
        g = xb.T @ (sw * (p - y)) / len(y) + l2 * np.r_[w[:-1], 0]
        w -= lr * g * 4
    return w


def learned(
    qs_train: Sequence[Q], keep: Sequence[str] | None = None
) -> Callable[[Q], tuple[np.ndarray, None]]:
    xs, ys = [], []
    names: list[str] = []
    for q in qs_train:
        x, names = features(q)
        xs.append(x)
        ys.append(np.array([1.0 if int(i) in q.gold else 0.0 for i in q.cand]))
    sel = [i for i, n in enumerate(names) if keep is None or n in keep]
    w = fit_lr(np.vstack(xs)[:, sel], np.concatenate(ys))

    def f(q: Q) -> tuple[np.ndarray, None]:
        x, _ = features(q)
        s = np.zeros_like(q.cos)
        s[q.cand] = x[:, sel] @ w[:-1]
        return s, None

    f.weights = dict(zip([names[i] for i in sel] + ["bias"], np.round(w, 3), strict=True))  # type: ignore[attr-defined]
    return f


def cross_validated(
    loc: Sequence[Q], keep: Sequence[str] | None, folds: int = 5
) -> dict[str, dict[str, float]]:
    convs = sorted({q.conv for q in loc})
    tally = Tally()
    for k in range(folds):
        test = set(convs[k::folds])
        f = learned([q for q in loc if q.conv not in test], keep)
        for q in (q for q in loc if q.conv in test):
            score, _ = f(q)
            tally.add(q.groups, score_ranking(rank(score, q), q.gold))
    return tally.means()


def lent(
    b_prev: float, b_next: float, alpha: float | None = 0.5, hop2: float = 0.0
) -> Callable[[Q], tuple[np.ndarray, None]]:
    """Lending from the previous and the next memory with their own shares (alpha None: the
    adaptive weight 0.4/0.7 below a best coverage of 0.5); `hop2`: a share of the best memory
    two steps away."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        rel = _adaptive_rel(q, alpha)
        s = rel + b_prev * neighbour(rel, q, "prev") + b_next * neighbour(rel, q, "next")
        if hop2:
            pp = np.where(q.prev >= 0, q.prev[np.maximum(q.prev, 0)], -1)
            nn = np.where(q.nxt >= 0, q.nxt[np.maximum(q.nxt, 0)], -1)
            two = np.maximum(
                np.where(pp >= 0, rel[np.maximum(pp, 0)], 0), np.where(nn >= 0, rel[np.maximum(nn, 0)], 0)
            )
            s = s + hop2 * two
        return s, None

    return f


def _adaptive_rel(q: Q, alpha: float | None) -> np.ndarray:
    """The fused relevance with weight `alpha` (None: 0.7 below a best coverage of 0.5, else 0.4)."""
    v, t = parts(q)
    a = alpha
    if a is None:
        tm = q.bm25 > 0
        a = 0.7 if (float(q.cover[tm].max()) if tm.any() else 0.0) < 0.5 else 0.4
    rel: np.ndarray = a * v + (1 - a) * t
    return rel


def _maxlend(q: Q, beta: float, alpha: float | None = None) -> tuple[np.ndarray, None]:
    rel = _adaptive_rel(q, alpha)
    return rel + beta * neighbour(rel, q), None


def adaptive(low: float, high: float, cut: float = 0.5) -> Callable[[Q], tuple[np.ndarray, None]]:
    """Query-dependent weight: vectors get `high` when no text candidate covers `cut` of the
    query's terms (the keyword side has only incidental matches), else `low`."""

    def f(q: Q) -> tuple[np.ndarray, None]:
        v, t = parts(q)
        tm = q.bm25 > 0
        best_cover = float(q.cover[tm].max()) if tm.any() else 0.0
        a = high if best_cover < cut else low
        return a * v + (1 - a) * t, None

    return f


def table(name: str, loc: dict[str, dict[str, float]], ja: dict[str, dict[str, float]]) -> str:
    h = loc["cats1-4"]
    cats = " ".join(
        f"c{c}:{loc[f'cat{c}']['hit@5']:.3f}/{loc[f'cat{c}']['recall@5']:.3f}" for c in (1, 2, 3, 4)
    )
    j = ja["all"]
    return (
        f"{name:30s} L h1 {h['hit@1']:.3f} h5 {h['hit@5']:.3f} mrr {h['mrr']:.3f} "
        f"r5 {h['recall@5']:.3f} | {cats} |"
        f" ja h1 {j['hit@1']:.3f} h5 {j['hit@5']:.3f} mrr {j['mrr']:.3f} "
        + " ".join(f"{g}:{ja[g]['hit@5']:.3f}" for g in ("ja", "en", "cross"))
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    loc, ja = build("locomo"), build("ja")
    variants: dict[str, Callable[[Q], tuple[np.ndarray, np.ndarray | None]]] = {"production": baseline}
    for bp, bn in ((0.1, 0.3), (0.3, 0.1), (0.2, 0.2), (0.15, 0.25), (0.25, 0.15)):
        variants[f"lent prev {bp} next {bn}"] = lent(bp, bn)
    for beta in (0.15, 0.2, 0.25):
        variants[f"nb max {beta} adaptive"] = lambda q, b=beta: _maxlend(q, b)
        variants[f"nb max {beta} alpha .45"] = lambda q, b=beta: _maxlend(q, b, 0.45)
    variants["lent 0.2/0.2 hop2 0.1"] = lent(0.2, 0.2, hop2=0.1)
    for a in (0.4, 0.6):
        variants[f"alpha {a}"] = lambda q, a=a: baseline(q, a)
    for beta in (0.1, 0.2, 0.3, 0.5):
        variants[f"nb max {beta}"] = smooth(beta)
        variants[f"nb mean {beta}"] = smooth(beta, "mean")
        variants[f"nb max {beta} expand"] = smooth(beta, expand=True)
        variants[f"nb cos {beta}"] = smooth_cos(beta)
    for low, high, cut in (
        (0.4, 0.6, 0.5),
        (0.4, 0.7, 0.5),
        (0.5, 0.7, 0.5),
        (0.45, 0.6, 0.34),
        (0.4, 0.6, 0.67),
    ):
        variants[f"adaptive {low}/{high}<{cut}"] = adaptive(low, high, cut)
    only = [s for s in args.only.split(",") if s]
    for name, f in variants.items():
        if only and not any(o in name for o in only):
            continue
        print(table(name, evaluate(loc, f), evaluate(ja, f)), flush=True)
    sets = {
        "lr base": ["v", "t", "cover", "tmask"],
        "lr base+models": ["v", "t", "cover", "tmask", "e5", "use"],
        "lr +nb": ["v", "t", "cover", "tmask", "nb_rel", "nb_v", "nb_t"],
        "lr all": None,
    }
    for name, keep in sets.items():
        if only and not any(o in name for o in only):
            continue
        full = learned(loc, keep)
        print(table(name + " (cv)", cross_validated(loc, keep), evaluate(ja, full)), flush=True)
        print("   weights (all LoCoMo):", full.weights, flush=True)  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
