"""Offline exploration of retrieval settings on cached embeddings (not part of the product).

    .venv/bin/python bench/quality/explore.py embed --model e5|use   # caches vectors in bench/results/
    .venv/bin/python bench/quality/explore.py eval                   # scores the candidate rankings

Embeddings of every LoCoMo turn and question and the ja set are computed once per model and
cached as .npy; BM25 is SQLite FTS5 over memhub's own index text and query form
(`memhub.core.text`), as production uses. Used to choose the production fusion; the
production path itself is measured by run.py.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import JA_SET, LOCOMO, REPO, Corpus, Tally, load_ja, load_locomo, score_ranking

from memhub.core.text import index_text, is_cjk, search_terms, term_coverage
from memhub.search.embedders import make_embedder
from memhub.store.sqlite.fts import match_query, match_term

CACHE = REPO / "bench" / "results"
HEAD = {"locomo": "cats1-4", "ja": "all"}
FLOORS = {"e5": 0.78, "use": 0.10}  # ranking.CALIBRATION's unrelated-text cosine


def corpora(dataset: str) -> list[Corpus]:
    return load_locomo(LOCOMO, None) if dataset == "locomo" else load_ja(JA_SET)


def cache_path(model: str, dataset: str, kind: str) -> Path:
    return CACHE / f"explore-{model}-{dataset}-{kind}.npy"


def embed(model: str, datasets: Sequence[str] = ("ja", "locomo")) -> None:
    embedder = make_embedder(model)
    embedder.load()
    for dataset in datasets:
        cs = corpora(dataset)
        passages = [text for c in cs for _, text in c.memories]
        queries = [q.text for c in cs for q in c.questions]
        for kind, texts, fn in (
            ("q", queries, embedder.embed_queries),
            ("p", passages, embedder.embed_passages),
        ):
            path = cache_path(model, dataset, kind)
            if path.exists():
                continue
            started = time.perf_counter()
            rows = [fn(texts[i : i + 32]) for i in range(0, len(texts), 32)]
            np.save(path, np.vstack(rows))
            print(
                f"{model} {dataset} {kind}: {len(texts)} in {time.perf_counter() - started:.0f}s", flush=True
            )


class Bm25:
    def __init__(self, texts: Sequence[str]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE f USING fts5(text, tokenize='porter unicode61')")
        self.db.executemany(
            "INSERT INTO f(rowid, text) VALUES (?, ?)", [(i, index_text(t)) for i, t in enumerate(texts)]
        )

    def scores(self, query: str, k: int = 200) -> dict[int, float]:
        match = match_query(query)
        if match is None:
            return {}
        rows = self.db.execute(
            "SELECT rowid, -bm25(f) FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?", (match, k)
        )
        return {int(r): float(s) for r, s in rows}

    def coverage(self, query: str, n: int) -> np.ndarray:
        """Per memory, the share of the query's terms it contains (0-1)."""
        terms = [match_term(term) for term in search_terms(query)]
        out = np.zeros(n)
        for term in terms:
            for (rowid,) in self.db.execute("SELECT rowid FROM f WHERE f MATCH ?", (term,)):
                out[int(rowid)] += 1.0
        return out / max(1, len(terms))


Scorer = Callable[[dict[str, object]], np.ndarray]


def minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def evaluate(dataset: str, models: Sequence[str]) -> None:
    cs = corpora(dataset)
    vec = {m: (np.load(cache_path(m, dataset, "p")), np.load(cache_path(m, dataset, "q"))) for m in models}
    configs: dict[str, Tally] = {}
    p0 = q0 = 0
    for c in cs:
        n = len(c.memories)
        keys = [k for k, _ in c.memories]
        index = {k: i for i, k in enumerate(keys)}
        bm = Bm25([t for _, t in c.memories])
        for qi, q in enumerate(c.questions):
            gold = {index[g] for g in q.gold}
            text = np.zeros(n)
            for i, s in bm.scores(q.text).items():
                text[i] = s
            tn = text / text.max() if text.max() > 0 else text
            cover = bm.coverage(q.text, n)
            matched_rows = np.flatnonzero(text > 0)
            cover_py = np.zeros(n)  # production's approximation (core.text.term_coverage)
            share = term_coverage(q.text)
            for i in matched_rows:
                cover_py[i] = share(c.memories[i][1])
            cos = {m: vec[m][0][p0 : p0 + n] @ vec[m][1][q0 + qi] for m in models}
            feats = {"bm25": tn}
            rankings: dict[str, np.ndarray] = {}
            for m in models:
                cm = cos[m]
                feats[m] = minmax(cm)
                # neighbour smoothing: a turn inherits part of its neighbours' similarity
                nb = np.maximum(np.r_[cm[1:], cm[-1]], np.r_[cm[0], cm[:-1]])
                feats[m + "+nb"] = minmax(cm + 0.3 * nb)
                feats[m + "+prev"] = minmax(cm + 0.3 * np.r_[cm[0], cm[:-1]])
            for name, cm, floor in [(m, cos[m], FLOORS[m]) for m in models] + (
                [
                    (
                        "cat",
                        0.75 * cos[models[0]] + 0.25 * cos[models[1]],
                        0.75 * FLOORS[models[0]] + 0.25 * FLOORS[models[1]],
                    )
                ]
                if len(models) == 2
                else []
            ):
                top = np.sort(cm)[-200:]
                lo = min(floor, float(top[0]))
                prod = np.clip((cm - lo) / (float(top[-1]) - lo), 0, 1)
                prod[cm < top[0]] = 0.0  # not a vector candidate
                matched = text > 0
                tmm = np.zeros(n)
                if matched.any():
                    lo_t, hi_t = float(text[matched].min()), float(text[matched].max())
                    tmm[matched] = (text[matched] - lo_t) / (hi_t - lo_t) if hi_t > lo_t else 1.0
                for a in (0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
                    rankings[f"PROD-{name}@{a}"] = a * prod + (1 - a) * tn
                    rankings[f"PRODMM-{name}@{a}"] = a * prod + (1 - a) * tmm
                    tma = tmm
                    if matched.any() and hi_t > min(lo_t, 0.5 * hi_t):
                        lo_a = min(lo_t, 0.5 * hi_t)
                        tma = np.where(matched, (text - lo_a) / (hi_t - lo_a), 0.0)
                    rankings[f"PRODMA-{name}@{a}"] = a * prod + (1 - a) * tma
                    # keyword evidence weighted by how much of the query a memory contains
                    rankings[f"COVER-{name}@{a}"] = a * prod + (1 - a) * tma * cover
                    rankings[f"COVER2-{name}@{a}"] = a * prod + (1 - a) * tma * cover**2
                    rankings[f"COVERPY-{name}@{a}"] = a * prod + (1 - a) * tma * cover_py
                    # adaptive: CJK queries lean on vectors (bigram BM25 is noisy, cannot cross languages)
                    b = 0.9 if any(is_cjk(ch) for ch in q.text) else a
                    rankings[f"ADAPT-{name}@{a}"] = b * prod + (1 - b) * tn
            if len(models) == 2:
                for w in (0.6, 0.7, 0.75, 0.8, 0.85):  # one concatenated vector: raw cosines weighted
                    feats[f"cat{w}"] = minmax(w * cos[models[0]] + (1 - w) * cos[models[1]])
                for w in (0.3, 0.4, 0.5, 0.6, 0.7):
                    feats[f"ens{w}"] = minmax(w * feats[models[0]] + (1 - w) * feats[models[1]])
                    feats[f"ens{w}+nb"] = minmax(
                        w * feats[models[0] + "+nb"] + (1 - w) * feats[models[1] + "+nb"]
                    )
            for name, f in feats.items():
                rankings[name] = f
                if name != "bm25":
                    for a in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
                        rankings[f"{name}|bm25@{a}"] = a * f + (1 - a) * tn
            for name, s in rankings.items():
                top = np.argsort(-s, kind="stable")[:10]
                configs.setdefault(name, Tally()).add(q.groups, score_ranking([int(i) for i in top], gold))
        p0 += n
        q0 += len(c.questions)
    head = HEAD[dataset]
    rows = sorted(((t.means()[head], name) for name, t in configs.items()), key=lambda r: -r[0]["hit@5"])
    print(f"== {dataset} ({head}) models={','.join(models)}")
    for means, name in rows:
        extra = ""
        if dataset == "ja":
            m = configs[name].means()
            extra = " ".join(f"{g}={m[g]['hit@5']:.3f}" for g in ("ja", "en", "cross") if g in m)
        scores = " ".join(f"{k} {means[k]:.3f}" for k in ("hit@5", "hit@1", "mrr", "recall@5"))
        print(f"{name:28s} {scores} {extra}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("embed", "eval"))
    parser.add_argument("--model", default="e5")
    parser.add_argument("--models", default="e5,use")
    parser.add_argument("--dataset", default="ja,locomo")
    args = parser.parse_args()
    if args.command == "embed":
        embed(args.model, args.dataset.split(","))
    else:
        for dataset in args.dataset.split(","):
            models = [m for m in args.models.split(",") if cache_path(m, dataset, "p").exists()]
            evaluate(dataset, models)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
