"""Retrieval quality of memhub's memory search: LoCoMo and a hand-written Japanese/English set.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/quality/run.py \\
        --dataset locomo|ja --embedder e5|use|hash|none \\
        [--limit-conversations N] [--out bench/results/quality-<dataset>-<embedder>.json] [--details]

What it does (see bench/quality/README.md for what the numbers mean):

1. Builds a fresh container (`build_container`) in a temporary directory with the `assoc`
   toolset and the chosen embedder, and loads the embedding model before anything is stored.
2. Creates one project per LoCoMo conversation (the ja set: one project) and stores every
   memory through the real MCP client (`memory(action="store", domain="project")`), as an agent
   would: each LoCoMo session in a memhub session of its own (`user(action="create_session")`,
   so each turn is temporally linked to the one before it), the ja set in one. LoCoMo
   turns become `"[{session date}] {speaker}: {text}"`, plus `" [image: {caption}]"` when the
   turn shared a picture. A LoCoMo memory's `created_at` is then set to its session's date
   and time (plus one second per turn) in the run's own database: the MCP tools cannot set
   it, and an agent storing a conversation as it happens would get those dates. The vectors
   come from the container's background backfill, as in `memhub serve`; the run waits until
   it has caught up and checks every memory got one.
3. Asks every question two ways:
   a. production: `memory(action="search", include_domains=["project"], project_id=...,
      limit=10, threshold=0)` through the MCP client (what an agent gets);
   b. sweep: one in-process `SearchEngine.search` call per question (k_txt = k_vec = 200, the
      production candidate count, but scoped to the project in the engine, where production
      takes 200 candidates over every memory the caller sees and filters them by project
      afterwards) whose raw BM25 and cosine scores are re-ranked offline with
      `linear@a` (min-max fusion, `memhub.search.fusion.fuse`), `rrf` (reciprocal rank fusion,
      k = 60), `production@a` (what `memory(action="search")` ranks by:
      `memhub.services.assoc.ranking.relevance` with the candidates' cosine range; importance
      is constant, so no rerank) and `calibrated@a` (the formula production used before
      f226ef8: clipped calibrated cosine plus BM25 / best BM25), for a in 0, 0.2, 0.3, 0.4,
      0.5, 0.6, 0.7, 0.8, 1 (a = vector weight).
4. Scores each ranking's top 10: hit@1/5/10, evidence recall@5/10 and MRR (cut at 10), per
   LoCoMo category (`cats1-4` is the headline, category 5, adversarial, is reported apart)
   or per ja query kind (`ja`, `en`, `cross`), writes a JSON report and prints tables with
   the best sweep configurations by hit@5 and by MRR. Also scored: `default_threshold`, what
   the same search returns when the caller leaves `threshold` at its default (0.7): the
   production order of the candidates whose calibrated similarity reaches it.

`--backend postgresql` stores everything in a throwaway embedded PostgreSQL 18 + pgvector
(bench/pg.py: keyword search by the tsvector ranking, vectors by pgvector's HNSW index) instead
of a SQLite file; `--db URL` names an existing, empty database instead.

`--e5-graph int8|int8s|mixed|q4` picks e5's ONNX Runtime graph for the memories and
`--e5-query-graph G` for the queries (search/embedders/e5.py `GRAPHS`; default: the embedder's
own, int8s for both since 2026-11-29): `--e5-graph q4` is what ran from 2026-11-28 to then,
`--e5-graph q4 --e5-query-graph q4` what ran before 2026-11-28.

`--limit-conversations N` keeps the first N LoCoMo conversations (a smoke run); `--details`
adds every question's production top 5 to the report. Everything runs locally. A search waits
up to 30 s for its query embedding (production: 1 s) so a busy machine cannot silently turn
a run into BM25; `vector_timeouts` in the report counts any that still happened, and
`production_errors` counts production searches that answered an error (scored as empty).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")  # read when a model's runtime loads: set first
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import anyio
from mcp import Client

from memhub.cli.container import Container, build_container
from memhub.core.clock import isoformat
from memhub.core.ids import MEM, PROJ
from memhub.core.models import Viewer
from memhub.core.settings import Settings
from memhub.search.embedders.e5 import GRAPHS
from memhub.search.fusion import FusedHit, fuse, reciprocal_rank_fusion
from memhub.services.assoc.models import MemoryInput
from memhub.services.assoc.ranking import calibrated, relevance, similarity, text_range
from memhub.services.assoc.search import ALPHA, CANDIDATES

REPO = Path(__file__).resolve().parents[2]
LOCOMO = Path(os.environ.get("MEMHUB_SHARED") or REPO.parent / "shared") / "data" / "locomo10.json"
JA_SET = REPO / "bench" / "data" / "ja_set.json"

DATASETS = ("locomo", "ja")
EMBEDDERS = ("e5+use", "e5", "use", "hash", "none")
ALPHAS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
CUTOFF = 10  # every ranking is scored on its top 10 (the production search's limit)
SWEEP_K = CANDIDATES  # candidates per side for the sweep: as many as the production search takes
RRF_K = 60
VECTOR_TIMEOUT = 30.0  # seconds a search waits for its query embedding
METRICS = ("hit@1", "hit@5", "hit@10", "recall@5", "recall@10", "mrr")
DEFAULT_THRESHOLD = float(MemoryInput.model_fields["threshold"].default)  # what a search without one uses
FAR_FUTURE = "9999-01-01T00:00:00.000000Z"
HEADLINE = {"locomo": "cats1-4", "ja": "all"}

Ranking = list[int]


# -- data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str
    gold: tuple[str, ...]  # memory keys (LoCoMo dia_ids, ja ids)
    groups: tuple[str, ...]  # the report groups it counts in


@dataclass
class Corpus:
    """One project's memories (key, text) and the questions asked of it."""

    name: str
    memories: list[tuple[str, str]] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    dropped: int = 0  # questions left with no usable evidence
    created: dict[str, str] = field(default_factory=dict)  # memory key -> its created_at (LoCoMo)

    def sessions(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """The memories by the session an agent would have stored them in, in order: a LoCoMo
        conversation's sessions (its turns' dia_ids `D{session}:{turn}`); the ja set, one."""
        out: list[tuple[str, list[tuple[str, str]]]] = []
        for key, text in self.memories:
            name = key.split(":")[0] if _EVIDENCE.fullmatch(key) else "notes"
            if not out or out[-1][0] != name:
                out.append((name, []))
            out[-1][1].append((key, text))
        return out


_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SPLIT = re.compile(r"[;,\s]+")


def normalize_evidence(raw: Sequence[str], turns: set[str] | Mapping[str, object]) -> list[str]:
    """Gold dia_ids: `"D8:6; D9:17"` split, `D:11:26` -> `D11:26`, `D30:05` -> `D30:5`; ids
    naming no turn dropped; order kept, duplicates removed."""
    out: list[str] = []
    for entry in raw:
        for part in _SPLIT.split(str(entry)):
            match = _EVIDENCE.fullmatch(part.strip())
            if match is None:
                continue
            dia_id = f"D{int(match[1])}:{int(match[2])}"
            if dia_id in turns and dia_id not in out:
                out.append(dia_id)
    return out


def turn_text(date: str, turn: Mapping[str, Any]) -> str:
    text = f"[{date}] {turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    return f"{text} [image: {caption}]" if caption else text


SESSION_TIME = "%I:%M %p on %d %B, %Y"  # LoCoMo's session_N_date_time: "1:56 pm on 8 May, 2023"


def session_time(text: str) -> datetime | None:
    """A LoCoMo session's date and time (UTC), None when it is missing or unreadable."""
    try:
        return datetime.strptime(text.strip(), SESSION_TIME).replace(tzinfo=UTC)
    except ValueError:
        return None


def load_locomo(path: Path, limit: int | None) -> list[Corpus]:
    data = json.loads(path.read_text(encoding="utf-8"))
    corpora: list[Corpus] = []
    for sample in data[:limit] if limit is not None else data:
        conversation = sample["conversation"]
        corpus = Corpus(name=f"locomo-{sample['sample_id']}")
        sessions = sorted(
            (int(m[1]), key)
            for key in conversation
            if (m := _SESSION.fullmatch(key)) and isinstance(conversation[key], list)
        )
        for number, key in sessions:
            date = conversation.get(f"session_{number}_date_time", "")
            corpus.memories.extend((turn["dia_id"], turn_text(date, turn)) for turn in conversation[key])
            if (moment := session_time(date)) is not None:  # turns a second apart, in order
                corpus.created.update(
                    (turn["dia_id"], isoformat(moment + timedelta(seconds=i)))
                    for i, turn in enumerate(conversation[key])
                )
        turns = {key for key, _ in corpus.memories}
        for qa in sample["qa"]:
            gold = normalize_evidence(qa.get("evidence", []), turns)
            if not gold:
                corpus.dropped += 1
                continue
            category = int(qa["category"])
            groups = ("all", f"cat{category}", *(("cats1-4",) if category <= 4 else ()))
            corpus.questions.append(Question(str(qa["question"]), tuple(gold), groups))
        corpora.append(corpus)
    return corpora


def load_ja(path: Path) -> list[Corpus]:
    data = json.loads(path.read_text(encoding="utf-8"))
    corpus = Corpus(name="ja-set")
    corpus.memories = [(m["id"], m["text"]) for m in data["memories"]]
    known = {key for key, _ in corpus.memories}
    for q in data["queries"]:
        missing = set(q["relevant"]) - known
        if missing or not q["relevant"]:
            raise ValueError(f"query {q['query']!r} names unknown memories {sorted(missing)}")
        corpus.questions.append(Question(q["query"], tuple(q["relevant"]), ("all", q["kind"])))
    return [corpus]


# -- metrics ----------------------------------------------------------------------------------


def score_ranking(ranked: Sequence[int], gold: set[int]) -> dict[str, float]:
    """Metrics of one ranking's top CUTOFF against the gold item ids."""
    top = list(ranked[:CUTOFF])
    first = next((i for i, item in enumerate(top) if item in gold), None)
    out = {f"hit@{k}": float(first is not None and first < k) for k in (1, 5, 10)}
    for k in (5, 10):
        out[f"recall@{k}"] = len(gold & set(top[:k])) / len(gold)
    out["mrr"] = 1.0 / (first + 1) if first is not None else 0.0
    return out


class Tally:
    """Running sums of the metrics per group."""

    def __init__(self) -> None:
        self.sums: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(METRICS, 0.0))
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, groups: Sequence[str], scores: Mapping[str, float]) -> None:
        for group in groups:
            self.counts[group] += 1
            for name in METRICS:
                self.sums[group][name] += scores[name]

    def means(self) -> dict[str, dict[str, float]]:
        return {
            group: {"n": self.counts[group], **{k: round(v / self.counts[group], 4) for k, v in sums.items()}}
            for group, sums in sorted(self.sums.items())
        }


# -- rankings ---------------------------------------------------------------------------------


def _clip(value: float) -> float:
    return max(0.0, min(1.0, value))


def clipped_calibrated_relevance(
    embedder_id: str | None,
    vector_score: float | None,
    text_score: float | None,
    best_text: float,
    alpha: float,
) -> float:
    """The relevance production ranked by until f226ef8: `alpha * calibrated(cos) + (1 - alpha) *
    bm25 / best_bm25`, the calibrated cosine clipped to 0-1 (kept here as a baseline)."""
    text = _clip(text_score / best_text) if text_score is not None and best_text > 0 else 0.0
    if embedder_id is None:
        return text
    vector = calibrated(embedder_id, vector_score) if vector_score is not None else 0.0
    return alpha * vector + (1 - alpha) * text


def _order(scores: Mapping[int, float]) -> Ranking:
    """The production order: score desc, then newest (highest id) first."""
    return sorted(scores, key=lambda item: (-scores[item], -item))[:CUTOFF]


def _ranges(hits: Sequence[FusedHit]) -> tuple[float, tuple[float, float], tuple[float, float]]:
    """The query's best BM25, (lowest, best) BM25 and (lowest, best) cosine, as
    `memory(action="search")` takes them."""
    texts = [h.text_score for h in hits if h.text_score is not None]
    best_text = max(texts, default=0.0)
    cosines = [h.vector_score for h in hits if h.vector_score is not None]
    return (
        best_text,
        text_range(texts),
        (min(cosines), max(cosines)) if cosines else (0.0, 1.0),
    )


def sweep_rankings(hits: Sequence[FusedHit], embedder_id: str | None) -> dict[str, Ranking]:
    """Every sweep configuration's top CUTOFF, from one search's raw text and vector scores."""
    text = [(h.item_id, h.text_score) for h in hits if h.text_score is not None]
    vector = [(h.item_id, h.vector_score) for h in hits if h.vector_score is not None]
    best_text, text_range, cosine_range = _ranges(hits)
    out: dict[str, Ranking] = {}
    for alpha in ALPHAS:
        fused = fuse(text, vector, alpha=alpha, k_final=CUTOFF)
        out[f"linear@{alpha:g}"] = [h.item_id for h in fused]
    out["rrf"] = [h.item_id for h in reciprocal_rank_fusion(text, vector, k=RRF_K, k_final=CUTOFF)]
    for alpha in ALPHAS:
        out[f"calibrated@{alpha:g}"] = _order(
            {
                h.item_id: clipped_calibrated_relevance(
                    embedder_id, h.vector_score, h.text_score, best_text, alpha
                )
                for h in hits
            }
        )
    for alpha in ALPHAS:
        out[f"production@{alpha:g}"] = _order(
            {
                h.item_id: relevance(
                    embedder_id, h.vector_score, h.text_score, text_range, alpha, cosine_range
                )
                for h in hits
            }
        )
    return out


def default_threshold_ranking(hits: Sequence[FusedHit], embedder_id: str | None) -> Ranking:
    """What `memory(action="search")` returns when the caller passes no `threshold`: the
    production order (`ranking.relevance` at ALPHA, no usage) of the hits whose similarity
    reaches DEFAULT_THRESHOLD; often fewer than CUTOFF."""
    best_text, text_range, cosine_range = _ranges(hits)
    return _order(
        {
            h.item_id: relevance(embedder_id, h.vector_score, h.text_score, text_range, ALPHA, cosine_range)
            for h in hits
            if similarity(embedder_id, h.vector_score, h.text_score, best_text) >= DEFAULT_THRESHOLD
        }
    )


# -- running ----------------------------------------------------------------------------------


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error or not isinstance(result.structured_content, dict):
        raise RuntimeError(f"{tool}({arguments.get('action')}) failed: {result.content}")
    return result.structured_content


async def production_search(client: Client, query: str, project: str) -> tuple[Ranking, str | None]:
    """The memory tool's top CUTOFF for `query` in `project`, and the error it answered, if any.

    A failed search counts as an empty result (and is reported), so one server bug does not
    stop the run: e.g. a query that matches nothing makes `memory(search)` answer an
    internal error when no embedder is configured.
    """
    result = await client.call_tool(
        "memory",
        {
            "action": "search",
            "query": query,
            "include_domains": ["project"],
            "project_id": project,
            "limit": CUTOFF,
            "threshold": 0.0,
        },
    )
    body = result.structured_content
    if result.is_error or not isinstance(body, dict):
        text = getattr(result.content[0], "text", "") if result.content else ""
        return [], text[:300]
    return [MEM.require(m["id"]) for m in body["memories"]], None


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def run(
    dataset: str,
    embedder: str,
    *,
    limit_conversations: int | None = None,
    data_path: Path | None = None,
    details: bool = False,
    log: Callable[[str], None] = progress,
    backend: str = "sqlite",
    db: str | None = None,
    e5_graph: str | None = None,
    e5_query_graph: str | None = None,
) -> dict[str, Any]:
    """Build, store, ask; the report (a JSON-able dict)."""
    if dataset == "locomo":
        corpora = load_locomo(data_path or LOCOMO, limit_conversations)
    else:
        corpora = load_ja(data_path or JA_SET)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memhub-quality-") as home, ExitStack() as stack:
        if backend == "postgresql" and db is None:
            sys.path.insert(0, str(REPO / "bench"))
            from pg import embedded_database

            db = stack.enter_context(embedded_database(Path(home) / "postgres"))
        settings = Settings(
            home=Path(home), user="bench", project="bench", embedder=embedder, toolsets=("assoc",),
            **({"db": db} if db else {}),
        )  # fmt: skip
        container = build_container(settings)
        graphs = _e5_graphs(container, e5_graph, e5_query_graph)
        try:
            async with anyio.create_task_group() as background:
                background.start_soon(container.run_background)  # vectors come from the backfill
                report = await _run(container, dataset, corpora, details, log)
                background.cancel_scope.cancel()
        finally:
            container.close()
    report["seconds"]["total"] = round(time.perf_counter() - started, 1)
    report["backend"] = "postgresql" if db else "sqlite"
    report.update(graphs)
    return report


def _e5_graphs(container: Container, graph: str | None, query_graph: str | None) -> dict[str, str]:
    """Sets e5's graphs for memories and queries (before it loads); what runs, for the report."""
    from memhub.search.embedders.e5 import E5Embedder

    embedding = container.runtime.embedding
    model = embedding.embedder if embedding is not None else None
    parts = [model, getattr(model, "first", None), getattr(model, "second", None)]
    e5 = next((part for part in parts if isinstance(part, E5Embedder)), None)
    if e5 is None:
        if graph or query_graph:
            raise SystemExit("--e5-graph / --e5-query-graph need an e5 embedder")
        return {}
    if graph:
        e5.graph = graph  # type: ignore[assignment]
    if query_graph:
        e5.query_graph = query_graph  # type: ignore[assignment]
    e5.prepare_passages()  # both graphs built: the names are those that run
    return {"e5_graph": e5.graph, "e5_query_graph": e5.query_graph}


async def _run(
    container: Container, dataset: str, corpora: list[Corpus], details: bool, log: Callable[[str], None]
) -> dict[str, Any]:
    runtime = container.runtime
    engine = runtime.search
    if engine is None:
        raise RuntimeError("the container has no search engine")
    # quality, not latency: a query embedding slowed by a busy machine must not silently drop
    # the vector side (production gives up after 1 s); timeouts are still counted and reported
    engine.vector_timeout = VECTOR_TIMEOUT
    embedding = runtime.embedding
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    if embedding is not None:
        await embedding.load()
    seconds["load"] = round(time.perf_counter() - started, 1)
    embedder_id = embedding.id if embedding is not None else None

    keys: list[dict[str, int]] = []  # per corpus: memory key -> item id
    projects: list[str] = []
    total = sum(len(c.memories) for c in corpora)
    started = time.perf_counter()
    async with Client(container.server) as client:
        stored = 0
        for corpus in corpora:
            created = await call(client, "project", action="create", name=corpus.name)
            projects.append(str(created["project"]["id"]))
            by_key: dict[str, int] = {}
            for session, memories in corpus.sessions():
                # as an agent would: one memhub session per conversation session, its turns in order
                await call(client, "user", action="create_session", session_name=f"{corpus.name} {session}")
                for key, text in memories:
                    result = await call(
                        client,
                        "memory",
                        action="store",
                        content=text,
                        domain="project",
                        project_id=projects[-1],
                    )
                    by_key[key] = MEM.require(result["memory"]["id"])
                    stored += 1
                    if stored % 500 == 0:
                        log(f"  stored {stored}/{total} ({time.perf_counter() - started:.0f}s)")
            keys.append(by_key)
            _date_memories(container, {by_key[k]: when for k, when in corpus.created.items() if k in by_key})
        seconds["store"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        if runtime.backfill is not None:
            while not runtime.backfill.running:
                await anyio.sleep(0.05)
            while not await runtime.backfill.settle(60):
                elapsed = time.perf_counter() - started
                log(f"  embedding: {runtime.backfill.embedded} of {total} ({elapsed:.0f}s)")
        seconds["embed"] = round(time.perf_counter() - started, 1)
        vectors = _check_vectors(container, [i for by_key in keys for i in by_key.values()])

        production = Tally()
        sweep: dict[str, Tally] = defaultdict(Tally)
        thresholded, returned = Tally(), 0
        asked: list[dict[str, Any]] = []
        errors: list[dict[str, str]] = []
        n_questions = sum(len(c.questions) for c in corpora)
        done = 0
        started = time.perf_counter()
        viewer = Viewer(principal=container.principal.id, now=FAR_FUTURE)
        for corpus, project, by_key in zip(corpora, projects, keys, strict=True):
            key_of = {item: key for key, item in by_key.items()}
            for question in corpus.questions:
                gold = {by_key[key] for key in question.gold}
                ranked, error = await production_search(client, question.text, project)
                if error is not None:
                    errors.append({"query": question.text, "error": error})
                scores = score_ranking(ranked, gold)
                production.add(question.groups, scores)
                hits = await engine.search(
                    viewer,
                    question.text,
                    kinds=("memory",),
                    project_id=PROJ.require(project),
                    k_txt=SWEEP_K,
                    k_vec=SWEEP_K,
                    k_final=2 * SWEEP_K,
                    alpha=0.5,
                    method="linear",
                )
                for config, ranking in sweep_rankings(hits, embedder_id).items():
                    sweep[config].add(question.groups, score_ranking(ranking, gold))
                filtered = default_threshold_ranking(hits, embedder_id)
                thresholded.add(question.groups, score_ranking(filtered, gold))
                returned += len(filtered)
                if details:
                    asked.append(
                        {
                            "query": question.text,
                            "groups": list(question.groups),
                            "relevant": list(question.gold),
                            "production_top5": [key_of.get(i, str(i)) for i in ranked[:5]],
                            "production_mrr": scores["mrr"],
                        }
                    )
                done += 1
                if done % 200 == 0:
                    log(f"  asked {done}/{n_questions} ({time.perf_counter() - started:.0f}s)")
        seconds["search"] = round(time.perf_counter() - started, 1)

    headline = HEADLINE[dataset]
    sweep_means = {config: tally.means() for config, tally in sweep.items()}
    report: dict[str, Any] = {
        "dataset": dataset,
        "embedder": container.settings.embedder,
        "embedder_id": embedder_id,
        "conversations": len(corpora),
        "memories": total,
        "vectors": vectors,
        "questions": n_questions,
        "dropped_questions": sum(c.dropped for c in corpora),
        "headline_group": headline,
        "cutoff": CUTOFF,
        "sweep_k": SWEEP_K,
        "seconds": seconds,
        "vector_timeouts": engine.vector_timeouts,
        "production_errors": len(errors),
        "production_error_examples": errors[:5],
        "production": production.means(),
        "sweep": sweep_means,
        "default_threshold": {
            "threshold": DEFAULT_THRESHOLD,
            "alpha": ALPHA,
            "mean_results": round(returned / max(1, n_questions), 2),
            "groups": thresholded.means(),
        },
        "best": {metric: _best(sweep_means, headline, metric) for metric in ("hit@5", "mrr", "recall@5")},
    }
    if details:
        report["details"] = asked
    return report


def _date_memories(container: Container, created: Mapping[int, str]) -> None:
    """Sets the memories' `created_at` in the run's database (LoCoMo: their session's date).

    The bench's own shortcut: `memory(action="store")` stamps the time of storing and no tool
    sets it (the seeds' contract), so the column is written directly, after the temporal links
    were made from the real storing order. Items' timestamps are ISO text in both backends."""
    if not created:
        return
    with container.runtime.store.transaction(write=True) as tx:
        p = tx.dialect.param  # type: ignore[attr-defined]  # both backends' SQL transactions
        tx.conn.cursor().executemany(  # type: ignore[attr-defined]
            f"UPDATE items SET created_at = {p} WHERE id = {p}", [(when, i) for i, when in created.items()]
        )


def _check_vectors(container: Container, items: list[int]) -> int:
    """How many stored memories have a vector; raises unless it is all of them (with an embedder)."""
    search = container.runtime.search
    index = search.vectors if search is not None else None
    if index is None:
        return 0
    index.refresh()
    with container.runtime.store.transaction(write=False) as tx:
        with_vector = sum(1 for item in items if tx.get_vector(item, index.embedder_id) is not None)
    if with_vector != len(items) or index.size() != len(items):
        raise RuntimeError(f"{with_vector} of {len(items)} memories have a vector ({index.size()} indexed)")
    return with_vector


def _best(sweep: Mapping[str, Mapping[str, Mapping[str, float]]], group: str, metric: str) -> dict[str, Any]:
    """The sweep configuration with the best `metric` on `group` (ties: the higher MRR, then listed order)."""
    config = max(sweep, key=lambda c: (sweep[c][group][metric], sweep[c][group]["mrr"]))
    return {"config": config, **sweep[config][group]}


# -- output -----------------------------------------------------------------------------------

COLUMNS = ("n", *METRICS)


def _row(label: str, values: Mapping[str, float], width: int) -> str:
    cells = [f"{int(values['n']):>5}"] + [f"{values[m]:>9.3f}" for m in METRICS]
    return f"{label:<{width}} " + " ".join(cells)


def _header(label: str, width: int) -> str:
    return f"{label:<{width}} " + f"{'n':>5} " + " ".join(f"{m:>9}" for m in METRICS)


def format_report(report: Mapping[str, Any]) -> str:
    headline = report["headline_group"]
    lines = [
        f"{report['dataset']} / {report['embedder']} ({report['embedder_id'] or 'BM25 only'})"
        f" on {report.get('backend', 'sqlite')}: "
        f"{report['memories']} memories, {report['questions']} questions "
        f"({report['dropped_questions']} dropped), {report['seconds']}",
        "",
        "production memory(action='search') via MCP, by group:",
        _header("group", 16),
    ]
    lines += [_row(group, values, 16) for group, values in report["production"].items()]
    lines += ["", f"sweep (in-process, scoped to the project), group {headline}:", _header("config", 16)]
    lines += [_row(config, groups[headline], 16) for config, groups in report["sweep"].items()]
    default = report["default_threshold"]
    lines += [
        "",
        f"with the default threshold {default['threshold']} (production order, no usage), "
        f"{default['mean_results']} results per query on average:",
        _header("group", 16),
    ]
    lines += [_row(group, values, 16) for group, values in default["groups"].items()]
    lines.append("")
    for metric, best in report["best"].items():
        lines.append(
            f"best by {metric}: {best['config']}  hit@1 {best['hit@1']:.3f}  hit@5 {best['hit@5']:.3f}  "
            f"recall@5 {best['recall@5']:.3f}  MRR {best['mrr']:.3f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", choices=DATASETS, required=True)
    parser.add_argument("--embedder", choices=EMBEDDERS, required=True)
    parser.add_argument("--limit-conversations", type=int, default=None, help="LoCoMo: first N conversations")
    parser.add_argument("--data", type=Path, default=None, help="dataset file (default: the standard one)")
    parser.add_argument("--out", type=Path, default=None, help="report path")
    parser.add_argument("--details", action="store_true", help="add each question's production top 5")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite",
                        help="postgresql: a throwaway embedded server (bench/pg.py)")  # fmt: skip
    parser.add_argument(
        "--db", default=None, help="an empty PostgreSQL database's URL (instead of --backend)"
    )
    parser.add_argument("--e5-graph", choices=GRAPHS, default=None, help="e5's ONNX Runtime graph")
    parser.add_argument("--e5-query-graph", choices=GRAPHS, default=None, help="e5's graph for queries alone")
    args = parser.parse_args(argv)
    if args.limit_conversations is not None and args.limit_conversations < 1:
        parser.error("--limit-conversations must be at least 1")
    out: Path = args.out or REPO / "bench" / "results" / f"quality-{args.dataset}-{args.embedder}.json"

    async def go() -> dict[str, Any]:
        return await run(
            args.dataset,
            args.embedder,
            limit_conversations=args.limit_conversations,
            data_path=args.data,
            details=args.details,
            backend=args.backend,
            db=args.db,
            e5_graph=args.e5_graph,
            e5_query_graph=args.e5_query_graph,
        )

    report = anyio.run(go)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(format_report(report))
    print(f"\nreport: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
