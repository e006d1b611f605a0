"""Issue 23, third round: contextual passages, screened offline (not part of the product).

    .venv/bin/python bench/quality/explore.py embed --model e5 ; ... --model use   # own vectors
    .venv/bin/python bench/quality/contextual.py embed --model e5|use               # contextual
    .venv/bin/python bench/quality/contextual.py eval [--only NAME,...]

A memory stored in a session follows its predecessor there (the temporal link production
makes). Here each memory's vector is computed from a *contextual passage*: a bounded window of
its predecessor's text, then its own text, so a turn like "Yes, I went there last week" gets a
vector that knows what "there" is; the keyword side is unchanged. Windows (`WINDOWS`): the last
100 or 200 characters of the predecessor (cut at a space when one is near), or all of it. The
first memory of a session has no predecessor: its passage is its own text.

Scored with bench/quality/lab.py's candidates and formula, and the production rerank as shipped
(query-dependent weight, 0.2 of the best neighbour, diversity λ 0.1 over the stored vectors):
per question the 200 best keyword candidates (unchanged) and the 200 best by the variant's
cosine. Variants of the vector side (e5+use joined 0.75 / 0.25 as production):

- `own`: today's vectors (reproduces ideas.py's `combo adaptive 0.2 mmr 0.1`);
- `ctx W`: the contextual vector replaces the own one (one vector per memory, re-indexed);
- `ctx W e5` / `ctx W use`: only that model's vector is contextual;
- `mix W m`: one stored vector per model, normalise((1 − m)·own + m·ctx);
- `max W`: the better of the own and the contextual cosine (two vectors per memory);
- `share s`: the rerank's neighbour share changed beside a contextual vector (context counted
  once at indexing, once at ranking).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore import cache_path, corpora
from lab import W_E5, K, Q, _adaptive_rel, build, evaluate, neighbour, table
from run import _EVIDENCE

from memhub.search.embedders import make_embedder

# name -> (predecessors read, characters kept from their end)
WINDOWS: dict[str, tuple[int, int]] = {"tail100": (1, 100), "prev": (1, 400), "two": (2, 400)}
SNAP = 30  # a tail window starts after the first space within its first SNAP characters
PASSAGE_FLOOR = 0.64  # diversity's floor: e5+use's cosine of two unrelated memories
Scorer = Callable[[Q], tuple[np.ndarray, np.ndarray | None]]


def window(prev: str, size: int) -> str:
    """The part of the predecessors' text the passage starts with."""
    if len(prev) <= size:
        return prev
    tail = prev[-size:]
    cut = tail.find(" ", 0, SNAP)
    return tail[cut + 1 :] if cut >= 0 else tail


def predecessors(dataset: str) -> list[int]:
    """Per memory (in the cache's order), the global index of its predecessor in its session,
    -1 for the first of a session."""
    out: list[int] = []
    p0 = 0
    for c in corpora(dataset):
        sessions = [k.split(":")[0] if _EVIDENCE.fullmatch(k) else "notes" for k, _ in c.memories]
        out.extend(p0 + i - 1 if i and sessions[i - 1] == s else -1 for i, s in enumerate(sessions))
        p0 += len(c.memories)
    return out


def passages(dataset: str, name: str) -> list[str]:
    texts = [t for c in corpora(dataset) for _, t in c.memories]
    prev = predecessors(dataset)
    depth, size = WINDOWS[name]
    out = []
    for i, text in enumerate(texts):
        before: list[str] = []
        p = prev[i]
        while p >= 0 and len(before) < depth:
            before.insert(0, texts[p])
            p = prev[p]
        out.append(f"{window(chr(10).join(before), size)}\n{text}" if before else text)
    return out


def ctx_path(model: str, dataset: str, name: str) -> Path:
    return cache_path(model, dataset, f"p-{name}")


def embed(model: str, names: Sequence[str], datasets: Sequence[str]) -> None:
    embedder = make_embedder(model)
    if embedder is None:
        raise SystemExit(f"no embedder {model!r}")
    embedder.load()
    for dataset in datasets:
        own = np.load(cache_path(model, dataset, "p"))
        prev = np.array(predecessors(dataset))
        todo = np.flatnonzero(prev >= 0)
        for name in names:
            path = ctx_path(model, dataset, name)
            if path.exists():
                continue
            texts = passages(dataset, name)
            started = time.perf_counter()
            out = own.copy()  # a session's first memory: its own text, its own vector
            for i in range(0, len(todo), 32):
                rows = todo[i : i + 32]
                out[rows] = embedder.embed_passages([texts[j] for j in rows])
            np.save(path, out)
            took = time.perf_counter() - started
            print(f"{model} {dataset} {name}: {len(todo)} passages in {took:.0f}s", flush=True)


@dataclasses.dataclass
class Side:
    """A variant's vector side: per model the stored passage vectors (for diversity) and the
    cosine a query sees (joined as production joins e5 and USE)."""

    e5: np.ndarray
    use: np.ndarray
    score: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None  # (e5q, useq) -> cosine


@cache
def vectors(model: str, dataset: str, kind: str) -> np.ndarray:
    """`own` / `q`: explore.py's passage / query vectors; `nb`: the predecessor's own vector
    (the control: no new embedding); a window's name: its contextual passages' vectors."""
    if kind == "nb":
        own, prev = vectors(model, dataset, "own"), np.array(predecessors(dataset))
        nb: np.ndarray = np.where((prev >= 0)[:, None], own[np.maximum(prev, 0)], own)
        return nb
    loaded: np.ndarray = np.load(cache_path(model, dataset, {"own": "p", "q": "q"}.get(kind, f"p-{kind}")))
    return loaded


def unit(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


@cache
def pair_cosine(dataset: str) -> np.ndarray:
    """Per memory, the joined cosine of its own vector with its predecessor's (nan: none)."""
    prev = np.array(predecessors(dataset))
    out = np.full(len(prev), np.nan)
    i = np.flatnonzero(prev >= 0)
    for model, w in (("e5", W_E5), ("use", 1 - W_E5)):
        v = vectors(model, dataset, "own")
        out[i] = np.nan_to_num(out[i]) + w * (v[i] * v[prev[i]]).sum(1)
    return out


def side(dataset: str, variant: str) -> Side:
    """`own`, or `KIND WINDOW [e5|use] [mM] [e5=M] [use=M] [gG]`: KIND ctx / mix / max; only
    that model's vector contextual (default both); mix weight M (or per model); contextual
    only where the memory's own
    joined cosine with its predecessor's is at least G (the two are on one subject)."""
    own = {"e5": vectors("e5", dataset, "own"), "use": vectors("use", dataset, "own")}
    if variant == "own":
        return Side(own["e5"], own["use"])
    kind, name, *opts = variant.split()
    models = [o for o in opts if o in own] or list(own)
    m = next((float(o[1:]) for o in opts if o.startswith("m")), 0.5)
    gate = next((float(o[1:]) for o in opts if o.startswith("g")), None)
    on = np.ones(len(own["e5"]), bool) if gate is None else pair_cosine(dataset) >= gate
    ctx = {k: np.where(on[:, None], vectors(k, dataset, name), v) for k, v in own.items() if k in models}
    ctx = own | ctx
    if kind == "ctx":
        return Side(ctx["e5"], ctx["use"])
    if kind == "mix":
        ms = {k: next((float(o[len(k) + 1 :]) for o in opts if o.startswith(k + "=")), m) for k in own}
        mixed = {k: unit((1 - ms[k]) * own[k] + ms[k] * ctx[k]) for k in own}
        return Side(mixed["e5"], mixed["use"])
    if kind == "max":

        def best(e5q: np.ndarray, useq: np.ndarray) -> np.ndarray:
            mine = W_E5 * own["e5"] @ e5q + (1 - W_E5) * own["use"] @ useq
            theirs = W_E5 * ctx["e5"] @ e5q + (1 - W_E5) * ctx["use"] @ useq
            out: np.ndarray = np.maximum(mine, theirs)
            return out

        return Side(own["e5"], own["use"], best)
    raise ValueError(variant)


def requeried(dataset: str, qs: Sequence[Q], s: Side) -> list[tuple[Q, np.ndarray, np.ndarray]]:
    """Each question's candidates under the variant's vector side, with its corpus's stored
    (e5, USE) vectors for diversity."""
    e5q, useq = vectors("e5", dataset, "q"), vectors("use", dataset, "q")
    sizes = [len(c.memories) for c in corpora(dataset)]
    starts = np.r_[0, np.cumsum(sizes)]
    out = []
    for qi, q in enumerate(qs):
        lo, hi = int(starts[q.conv]), int(starts[q.conv + 1])
        if s.score is None:
            ce5, cus = s.e5[lo:hi] @ e5q[qi], s.use[lo:hi] @ useq[qi]
            cos = W_E5 * ce5 + (1 - W_E5) * cus
        else:
            full = s.score(e5q[qi], useq[qi])
            cos, ce5, cus = full[lo:hi], q.cos_e5, q.cos_use
        vmask = np.zeros(hi - lo, bool)
        vmask[np.argsort(-cos, kind="stable")[:K]] = True
        cand = np.flatnonzero(vmask | (q.bm25 > 0))
        nq = dataclasses.replace(q, cos=cos, cos_e5=ce5, cos_use=cus, vmask=vmask, cand=cand)
        out.append((nq, s.e5[lo:hi], s.use[lo:hi]))
    return out


def production(
    share: float = 0.2, lam: float = 0.1, depth: int = 30, k: int = 10
) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """The shipped rerank: query-dependent weight, `share` of the best candidate neighbour,
    then maximal marginal relevance over the stored vectors (ideas.py's `mmr`)."""

    def f(q: Q, e5: np.ndarray, use: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rel = _adaptive_rel(q, None)
        cand = np.zeros(len(q.cos), bool)
        cand[q.cand] = True
        s = rel + share * neighbour(np.where(cand, rel, 0.0), q)
        top = q.cand[np.lexsort((-q.cand, -s[q.cand]))[:depth]]
        sim = W_E5 * e5[top] @ e5[top].T + (1 - W_E5) * use[top] @ use[top].T
        sim = np.clip((sim - PASSAGE_FLOOR) / (1 - PASSAGE_FLOOR), 0, 1)
        chosen: list[int] = []
        red = np.zeros(len(top))
        left = np.ones(len(top), bool)
        for _ in range(min(k, len(top))):
            j = int(np.argmax(np.where(left, s[top] - lam * red, -np.inf)))
            chosen.append(j)
            left[j] = False
            red = np.maximum(red, sim[j])
        out = np.full(len(q.cos), -1e9)
        out[top[chosen]] = 1e3 - np.arange(len(chosen))
        return out, top[chosen]

    return f


def score(dataset: str, qs: Sequence[Q], variant: str, share: float = 0.2) -> dict[str, dict[str, float]]:
    rows = requeried(dataset, qs, side(dataset, variant))
    f = production(share)
    extra = {id(q): (e5, use) for q, e5, use in rows}
    return evaluate([q for q, _, _ in rows], lambda q: f(q, *extra[id(q)]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("embed", "eval"))
    parser.add_argument("--model", default="e5")
    parser.add_argument("--windows", default=",".join(WINDOWS))
    parser.add_argument("--dataset", default="ja,locomo")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    names = args.windows.split(",")
    if args.command == "embed":
        embed(args.model, names, args.dataset.split(","))
        return 0
    loc, ja = build("locomo"), build("ja")
    variants: list[tuple[str, float]] = [("own", 0.2)]
    for name in names:
        if not all(ctx_path(m, d, name).exists() for m in ("e5", "use") for d in ("ja", "locomo")):
            continue
        variants += [(f"ctx {name}", 0.2), (f"ctx {name} e5", 0.2), (f"ctx {name} use", 0.2)]
        variants += [(f"mix {name} m{m}", 0.2) for m in (0.2, 0.3, 0.5)]
        variants += [(f"mix {name} use m{m}", 0.2) for m in (0.3, 0.5)]
        variants += [(f"max {name}", 0.2), (f"ctx {name} g0.75", 0.2)]
    if "prev" in names and ctx_path("e5", "locomo", "prev").exists():
        variants += [("mix prev e5=0.4 use=0.3", 0.2), ("mix prev e5=0.3 use=0.5", 0.2)]
        variants += [("mix prev m0.3", 0.1), ("mix prev m0.3", 0.3), ("ctx prev", 0.0), ("ctx prev", 0.1)]
    variants += [(f"mix nb m{m}", 0.2) for m in (0.2, 0.3)]  # control: the predecessor's own vector
    only = [s for s in args.only.split(",") if s]
    for variant, share in variants:
        label = variant if share == 0.2 else f"{variant} share {share}"
        if only and not any(o in label for o in only):
            continue
        print(table(label, score("locomo", loc, variant, share), score("ja", ja, variant, share)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
