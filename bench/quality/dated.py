"""Issue 23, fourth round: time in the query, screened offline (not part of the product).
Builds on bench/quality/lab.py and ideas.py (same cached candidates, the production formula).

    .venv/bin/python bench/quality/dated.py [--only NAME,...]

A question's time expression ("in June", "May 3, 2023", "last year", 「先週」) is read by
`memhub.search.when.spans` against a reference moment, and a candidate whose date is in or
near one of those spans gets `score · (1 + boost · nearness)` before the diversity step. A
LoCoMo memory's date is its session's (what run.py gives it as created_at), the reference
moment the conversation's last session (its "now"); the ja set's notes were all stored at
one moment, which is also its "now". Rows: lab.table's, plus the 219 LoCoMo questions that
name a time (`dated`) and the rest (`undated`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore import corpora
from ideas import DATASET, lend, passages, rel_of
from lab import Q, build, evaluate, table
from run import LOCOMO

from memhub.search.when import Span, nearness, spans

Scorer = Callable[[Q], tuple[np.ndarray, np.ndarray | None]]
SESSION_DATE = "%I:%M %p on %d %B, %Y"  # LoCoMo: "1:56 pm on 8 May, 2023"
JA_NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)  # the ja set: every note stored at one moment


def session_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), SESSION_DATE).replace(tzinfo=UTC)


@cache
def dates(dataset: str) -> list[list[datetime]]:
    """Per corpus, each memory's date (LoCoMo: its session's; the ja set: one moment)."""
    if dataset == "ja":
        return [[JA_NOW] * len(c.memories) for c in corpora("ja")]
    raw = {f"locomo-{s['sample_id']}": s["conversation"] for s in json.loads(LOCOMO.read_text("utf-8"))}
    out = []
    for c in corpora("locomo"):
        conv = raw[c.name]
        out.append([session_date(conv[f"session_{k.split(':')[0][1:]}_date_time"]) for k, _ in c.memories])
    return out


QINFO: dict[int, tuple[str, list[Span], datetime]] = {}  # id(q) -> (question, its spans, its now)
WALL = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)  # what production's `now` is when run.py runs


@cache
def _spans(text: str, now: datetime, years: int) -> tuple[Span, ...]:
    return spans(text, now, years)


def boosted(
    boost: float,
    before: float,
    after: float,
    share: float = 0.2,
    lam: float = 0.1,
    depth: int = 30,
    years: int = 1,
    wall: bool = False,
) -> Scorer:
    """Production (adaptive weight, context share, MMR λ) with the time factor before MMR, as
    a rerank weight (the diversity penalty scales with it, as with importance). `years`: how
    many years a date without one names; `wall`: read the query against the run's clock
    (relative expressions then name no LoCoMo session) instead of the conversation's end."""

    def f(q: Q) -> tuple[np.ndarray, np.ndarray]:
        s = lend(rel_of(q, None), q, share)
        text, _, now = QINFO[id(q)]
        found = _spans(text, WALL if wall else now, years)
        w = np.ones(len(s))
        if found and boost:
            when = dates(DATASET[id(q)])[q.conv]
            b, a = timedelta(days=before), timedelta(days=after)
            near = np.zeros(len(s))
            for i in q.cand:
                near[i] = nearness(when[i], found, b, a)
            w = 1 + boost * near
        return _mmr(q, s * w, w, lam, depth)

    return f


def _mmr(
    q: Q, s: np.ndarray, w: np.ndarray, lam: float, depth: int, k: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """ideas.mmr's selection over given scores, the penalty times each candidate's weight `w`
    (production's diversity: `score − λ · weight · redundancy`)."""
    e5, use = passages(DATASET[id(q)])[q.conv]
    top = q.cand[np.lexsort((-q.cand, -s[q.cand]))[:depth]]
    sim = np.clip((0.75 * e5[top] @ e5[top].T + 0.25 * use[top] @ use[top].T - 0.64) / (1 - 0.64), 0, 1)
    chosen: list[int] = []
    left = list(range(len(top)))
    while left and len(chosen) < k:
        j = max(
            left,
            key=lambda j: float(s[top[j]] - lam * w[top[j]] * max((sim[j, c] for c in chosen), default=0)),
        )
        chosen.append(j)
        left.remove(j)
    out = np.full(len(q.cos), -1e9)
    for rank_, j in enumerate(chosen):
        out[top[j]] = 1e3 - rank_
    return out, top[chosen]


def annotate(dataset: str, qs: Sequence[Q]) -> list[Q]:
    """Fills QINFO and DATASET; LoCoMo questions get a `dated` / `undated` group."""
    cs = corpora(dataset)
    now = [max(d) for d in dates(dataset)]
    questions = [(ci, x) for ci, c in enumerate(cs) for x in c.questions]
    out = []
    for q, (ci, x) in zip(qs, questions, strict=True):
        found = list(spans(x.text, now[ci]))
        if dataset == "locomo" and "cats1-4" in q.groups:
            q = replace(q, groups=(*q.groups, "dated" if found else "undated"))
        DATASET[id(q)] = dataset
        QINFO[id(q)] = (x.text, found, now[ci])
        out.append(q)
    return out


def row(name: str, loc: dict[str, dict[str, float]], ja: dict[str, dict[str, float]]) -> str:
    d, u = loc["dated"], loc["undated"]
    return (
        table(name, loc, ja)
        + f" | dated({int(d['n'])}) h1 {d['hit@1']:.3f} h5 {d['hit@5']:.3f} mrr {d['mrr']:.3f}"
        + f" r5 {d['recall@5']:.3f} | undated h5 {u['hit@5']:.3f} mrr {u['mrr']:.3f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--show", action="store_true", help="print the dated questions and their spans")
    args = parser.parse_args()
    loc, ja = annotate("locomo", build("locomo")), annotate("ja", build("ja"))
    if args.show:
        for q in loc + ja:
            text, found, _ = QINFO[id(q)]
            if found:
                print(
                    q.groups[1], text, [(s.start.date().isoformat(), s.end.date().isoformat()) for s in found]
                )
        return 0
    v: dict[str, Scorer] = {"production": boosted(0.0, 0, 0)}
    for boost in (0.1, 0.2, 0.3, 0.5, 1.0):
        v[f"time x{boost} -1/+7d 20y wall"] = boosted(boost, 1, 7, years=20, wall=True)
    for before, after in ((0, 0), (1, 3), (3, 14), (7, 30)):
        v[f"time x0.3 -{before}/+{after}d 20y wall"] = boosted(0.3, before, after, years=20, wall=True)
    for boost in (0.3, 0.5):
        v[f"time x{boost} -1/+7d latest, conversation's now"] = boosted(boost, 1, 7)
        v[f"time x{boost} -1/+7d 20y, conversation's now"] = boosted(boost, 1, 7, years=20)
    only = [s for s in args.only.split(",") if s]
    for name, f in v.items():
        if only and not any(re.search(o, name) for o in only):
            continue
        print(row(name, evaluate(loc, f), evaluate(ja, f)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
