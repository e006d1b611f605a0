"""Issue 23, fifth round: a second retrieval for multi-hop questions, screened offline (not part
of the product). Builds on bench/quality/lab.py, ideas.py and dated.py (same cached candidates;
the shipped ranking is the first stage).

    .venv/bin/python bench/quality/hop.py [--only REGEX,...]

The first stage is what `memory(action="search")` ranks by today (dated.py's `time x0.3
-1/+7d 20y wall`: query-dependent fusion weight, 0.2 of the best neighbour, time weight,
diversity λ 0.1). Its first `keep` results stay where they are (hit@1 cannot move); the slots
up to rank 5 go to the best memories of a second retrieval seeded by the first result, not
already shown; ranks 6-10 are the first stage's order without what is already shown. The
second retrievals score every memory of the project (a non-candidate of the first stage
starts at 0):

- `order`: the first stage's own order (control: must equal `production`);
- `vec w`: the first stage's score plus `w` × the seed's passage cosine (e5+use, 0 at the
  unrelated level 0.64, 1 at the best other memory): a second vector search from the seed;
- `kw w nN`: the first stage's score plus `w` × a second BM25 (min-max over its matches) of
  the query plus the seed's N rarest terms that the query lacks (names, numbers, rare words);
- `other-session`: only memories of another session than the seed (LoCoMo: another LoCoMo
  session; the ja set is one session: the filter lets nothing through and the slots fall back
  to the first stage's order).

Rows: lab.table's, then multi-hop (category 1) hit@5 / recall@5 (and recall@5 on the
multi-hop questions whose first result is an evidence turn, `seed ok`) and ja recall@5. Two
diagnostic rows seed from the best-ranked evidence turn among the first 3 results (an
oracle: what the slots could give with a right seed). The first line counts the multi-hop
questions whose evidence spans 2+ sessions and how often the first result is one of their
evidence turns.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from functools import cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dated
from dated import QINFO, annotate, boosted, dates
from explore import corpora
from ideas import DATASET, bm25s, lend, passages, rel_of, texts
from lab import Q, build, evaluate, table

from memhub.core.text import search_terms
from memhub.search.when import nearness
from memhub.store.sqlite.fts import match_term

Scorer = Callable[[Q], tuple[np.ndarray, np.ndarray | None]]
Second = Callable[[Q, np.ndarray, list[int]], np.ndarray]
SHIPPED = boosted(0.3, 1, 7, years=20, wall=True)  # the first stage: today's ranking
UNRELATED_PASSAGES = 0.64  # e5+use passage-to-passage cosine of unrelated texts (ideas.mmr)
FIRST: dict[int, tuple[np.ndarray, list[int]]] = {}  # id(q) -> first_stage(q)


@cache
def sessions(dataset: str) -> list[np.ndarray]:
    """Per corpus, each memory's session (LoCoMo: `D3` of `D3:5`; the ja set: one)."""
    return [
        np.array([k.split(":")[0] if dataset == "locomo" else "s" for k, _ in c.memories])
        for c in corpora(dataset)
    ]


def first_stage(q: Q) -> tuple[np.ndarray, list[int]]:
    """The shipped score before diversity (time weight included; 0 off the candidates) and the
    shipped top 10 (diversity included)."""
    if id(q) not in FIRST:
        s = lend(rel_of(q, None), q, 0.2)
        text, _, _ = QINFO[id(q)]
        found = dated._spans(text, dated.WALL, 20)
        if found:
            when = dates(DATASET[id(q)])[q.conv]
            near = np.zeros(len(s))
            for i in q.cand:
                near[i] = nearness(when[i], found, timedelta(days=1), timedelta(days=7))
            s = s * (1 + 0.3 * near)
        on = np.zeros(len(s))
        on[q.cand] = s[q.cand]
        _, order = SHIPPED(q)
        FIRST[id(q)] = (on, [int(i) for i in order])
    return FIRST[id(q)]


@cache
def _df(dataset: str, conv: int, term: str) -> int:
    db = bm25s(dataset)[conv].db
    return int(db.execute("SELECT count(*) FROM f WHERE f MATCH ?", (match_term(term),)).fetchone()[0])


def seeds_of(q: Q, order: list[int], m: int) -> list[int]:
    """The seeds: the first stage's first `m` results; m = 0 is the oracle (diagnostic only):
    the best-ranked evidence turn among the first 3 results, else the first result."""
    if m:
        return order[:m]
    return [next((i for i in order[:3] if i in q.gold), order[0])]


def rare_terms(q: Q, seed: int, n: int) -> list[str]:
    """The seed's `n` rarest terms in its project (longer than 2) that the query lacks."""
    ds = DATASET[id(q)]
    have = set(search_terms(QINFO[id(q)][0]))
    own = [t for t in dict.fromkeys(search_terms(texts(ds)[q.conv][seed])) if t not in have and len(t) > 2]
    return sorted(own, key=lambda t: (_df(ds, q.conv, t), t))[:n]


def order_of(q: Q, s: np.ndarray, order: list[int]) -> np.ndarray:
    """The first stage's order, then nothing."""
    out = np.full(len(s), -np.inf)
    for r, i in enumerate(order):
        out[i] = 1e3 - r
    return out


def vec(w: float, m: int = 1) -> Second:
    def f(q: Q, s: np.ndarray, order: list[int]) -> np.ndarray:
        e5, use = passages(DATASET[id(q)])[q.conv]
        seed = seeds_of(q, order, m)
        pc = (0.75 * (e5 @ e5[seed].T) + 0.25 * (use @ use[seed].T)).max(1)
        pc[seed] = UNRELATED_PASSAGES
        best = float(pc.max())
        if best <= UNRELATED_PASSAGES:
            return s
        return s + w * np.clip((pc - UNRELATED_PASSAGES) / (best - UNRELATED_PASSAGES), 0, 1)

    return f


def kw(w: float, n: int, m: int = 1) -> Second:
    def f(q: Q, s: np.ndarray, order: list[int]) -> np.ndarray:
        ds = DATASET[id(q)]
        extra = list(dict.fromkeys(t for i in seeds_of(q, order, m) for t in rare_terms(q, i, n)))
        if not extra:
            return s
        found = bm25s(ds)[q.conv].scores(QINFO[id(q)][0] + " " + " ".join(extra), 200)
        if not found:
            return s
        b2 = np.zeros(len(s))
        for i, x in found.items():
            b2[i] = x
        hit = b2 > 0
        lo, hi = float(b2[hit].min()), float(b2[hit].max())
        t2 = np.where(hit, (b2 - lo) / (hi - lo), 0.0) if hi > lo else hit.astype(float)
        return s + w * t2

    return f


def hop(keep: int, second: Second, other_session: bool = False, slots: int = 5) -> Scorer:
    """The first stage's first `keep` results, then up to rank `slots` the second retrieval's
    best not yet shown (of another session than the seed when `other_session`), then the first
    stage's order."""

    def f(q: Q) -> tuple[np.ndarray, np.ndarray]:
        s, order = first_stage(q)
        out = order[:keep]
        s2 = second(q, s, order)
        ok = np.isfinite(s2)
        ok[out] = False
        if other_session:
            sess = sessions(DATASET[id(q)])[q.conv]
            ok &= sess != sess[order[0]]
        idx = np.flatnonzero(ok)
        best = idx[np.lexsort((-idx, -s2[idx]))]
        out = out + [int(i) for i in best[: slots - keep]]
        out += [i for i in order if i not in out]
        out = out[:10]
        score = np.full(len(s), -1e9)
        for r, i in enumerate(out):
            score[i] = 1e3 - r
        return score, np.array(out)

    return f


def stats(loc: list[Q]) -> str:
    multi = [q for q in loc if "cat1" in q.groups]
    sess = sessions("locomo")
    spread = [q for q in multi if len({sess[q.conv][g] for g in q.gold}) > 1]
    first_gold = sum(1 for q in spread if first_stage(q)[1][0] in q.gold)
    return (
        f"multi-hop: {len(multi)} questions, {sum(len(q.gold) > 1 for q in multi)} with 2+ evidence"
        f" turns, {len(spread)} across 2+ sessions; the first result is evidence in {first_gold}"
    )


def seeded(qs: list[Q]) -> list[Q]:
    """Multi-hop questions whose first result is evidence get the group `cat1 seed ok`."""
    out = []
    for q in qs:
        if "cat1" in q.groups and first_stage(q)[1][0] in q.gold:
            new = replace(q, groups=(*q.groups, "cat1 seed ok"))
            DATASET[id(new)], QINFO[id(new)], FIRST[id(new)] = DATASET[id(q)], QINFO[id(q)], FIRST[id(q)]
            q = new
        out.append(q)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    loc0, ja = annotate("locomo", build("locomo")), annotate("ja", build("ja"))
    print(stats(loc0), flush=True)
    loc = seeded(loc0)
    v: dict[str, Scorer] = {
        "production": SHIPPED,
        "keep 3, order (control)": hop(3, order_of),
        "keep 3, order other-session": hop(3, order_of, other_session=True),
        "keep 3, vec 0.5": hop(3, vec(0.5)),
        "keep 3, vec 0.5 other-session": hop(3, vec(0.5), other_session=True),
        "keep 3, kw 0.5 n5": hop(3, kw(0.5, 5)),
        "keep 3, kw 0.5 n5 other-session": hop(3, kw(0.5, 5), other_session=True),
        "keep 2, order other-session": hop(2, order_of, other_session=True),
        "keep 3, vec 0.5 seeds 3": hop(3, vec(0.5, 3)),
        "keep 3, kw 0.5 n5 seeds 3": hop(3, kw(0.5, 5, 3)),
        "oracle seed, vec 0.5 (diagnostic)": hop(3, vec(0.5, 0)),
        "oracle seed, kw 0.5 n5 (diagnostic)": hop(3, kw(0.5, 5, 0)),
    }
    only = [s for s in args.only.split(",") if s]
    for name, f in v.items():
        if only and not any(re.search(o, name) for o in only):
            continue
        lr, jr = evaluate(loc, f), evaluate(ja, f)
        c1, ok, j = lr["cat1"], lr["cat1 seed ok"], jr["all"]
        print(
            table(name, lr, jr)
            + f" | multi-hop h5 {c1['hit@5']:.3f} r5 {c1['recall@5']:.3f}"
            + f" (seed ok, {int(ok['n'])}: r5 {ok['recall@5']:.3f}) | ja r5 {j['recall@5']:.3f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
