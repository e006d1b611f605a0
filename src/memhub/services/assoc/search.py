"""Memory search: `memory(action='search')` and the `search` tool's five types.

Ranked searches (semantic, advanced with a query, memory search) fuse BM25 and vector
similarity through the search engine, keep hits whose calibrated similarity reaches
`threshold`, and sort by the usage/importance-aware score of `ranking.py`. The other types
are filters: tags (most matching tags first), timerange (newest first), advanced without a
query (most important first), similar (nearest neighbours of one memory's vector).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import ErrorKind, MemhubError, invalid
from memhub.core.ids import MEM, PROJ
from memhub.core.models import Kind, Viewer
from memhub.search import calibration, context, diversity, when
from memhub.search.explain import Explanation
from memhub.search.pipeline import Candidates
from memhub.services import access
from memhub.services.assoc import domains, ranking
from memhub.services.assoc import models as m
from memhub.services.retrieval import retrieve
from memhub.services.runtime import Call
from memhub.store.base import ItemBrief, ItemQuery, ItemRow, Tx

CANDIDATES = 200  # per retriever; the filters and the threshold then narrow them
ALPHA = 0.5  # vector weight in the fusion: with e5+use the best balance of LoCoMo and the ja set
CONTEXT_SHARE = 0.2  # of the best neighbour's relevance a memory borrows (search/context.py)
# diversity of the first results (search/diversity.py): a result close to one already shown
# loses up to 0.1 of relevance (before context's rescale by 1 + share), chosen among the
# 2 · limit best-scored (at least DIVERSITY_POOL)
DIVERSITY = 0.1 / (1 + CONTEXT_SHARE)
DIVERSITY_POOL = 20
NORM_BATCH = 32  # texts read at once when a relevance needs one (a search reads ~40 of ~150)
# time in the query (search/when.py): a memory created in (or near) a span the query names
# ("in June", "May 3, 2023", "last week", 「先週」) is weighted 1 + TIME_BOOST against 1 for
# the others (falling off TIME_BEFORE ahead of the span and TIME_AFTER past it: a memory
# tells what happened a while before), rescaled by 1 + TIME_BOOST so scores stay in [0, 1];
# a date without its year names its last TIME_YEARS occurrences
TIME_BOOST = 0.3
TIME_BEFORE = timedelta(days=1)
TIME_AFTER = timedelta(days=7)
TIME_YEARS = 20
MAX_TOTAL = 1_000  # filter searches count matches up to this
PENDING_NOTE = "vectors of memories stored just now are still being computed; search again in a moment"


@dataclass(frozen=True)
class SearchScope:
    """Which domains a search covers and which projects qualify, and whose session: the
    session rule itself lives in the viewer (the store's one visibility filter)."""

    domains: tuple[str, ...]
    projects: tuple[int, ...] | None  # None: every project the caller belongs to
    session_id: str | None  # session memories only from this session (None: the current one)
    only_projects: bool = False  # True: nothing but the memories of `projects` (no other domain)

    def viewer(self, tx: Tx, call: Call) -> Viewer:
        return access.viewer(tx, call.principal, sessions="current", session_id=self.session_id)

    def restrict(self, query: ItemQuery) -> ItemQuery:
        if self.only_projects and self.projects is not None:
            return replace(query, scopes=("project",), project_ids=self.projects)
        return replace(query, scopes=self.domains, scope_projects=self.projects)


def scope(
    domains: Sequence[str] | None, project_ids: Sequence[str] | None, session_id: str | None
) -> SearchScope:
    """memory(search)'s scope: `project_ids` narrows the project domain, other domains stay."""
    projects = tuple(sorted({PROJ.require(p) for p in project_ids})) if project_ids else None
    return SearchScope(tuple(domains) if domains else m.DOMAINS, projects, session_id)


def filter_scope(domains: Sequence[str] | None, project_ids: Sequence[str] | None) -> SearchScope:
    """The `search` tool's `filters`: `project_ids` means only these projects' memories (their
    description says so), never the user, global or session memories beside them."""
    if project_ids and domains and "project" not in domains:
        raise invalid("filters.project_ids selects project memories: include 'project' in filters.domains")
    scoped = scope(domains, project_ids, None)
    return replace(scoped, only_projects=scoped.projects is not None)


async def ranked(
    call: Call,
    query: str,
    where: ItemQuery,
    scoped: SearchScope,
    limit: int,
    threshold: float,
    project_id: int | None = None,
    explain: Explanation | None = None,
) -> tuple[list[m.Memory], int, str | None]:
    """(memories, matches, note): the note says what the search may have missed (read your
    writes: runtime.Call.catch_up). With `explain`, the rerank's factors are recorded there."""

    def work(tx: Tx, found: Candidates) -> tuple[list[m.Memory], int]:
        # score every candidate from its brief, then read the few that are returned in full
        hits, viewer, embedder = found.hits, found.viewer, found.embedder
        texts = [h.text_score for h in hits if h.text_score is not None]
        best_text = max(texts, default=0.0)
        text_range = ranking.text_range(texts)
        cosines = [h.vector_score for h in hits if h.vector_score is not None]
        cosine_range = (min(cosines), max(cosines)) if cosines else (0.0, 1.0)
        by_id = found.by_id
        briefs = tx.query_briefs(viewer, replace(candidates, ids=list(by_id), limit=len(by_id) or 1))
        worded = [b.id for b in briefs if by_id[b.id].text_score is not None]  # coverage counts for these
        sims = {
            b.id: ranking.similarity(embedder, by_id[b.id].vector_score, by_id[b.id].text_score, best_text)
            for b in briefs
        }
        passes = {i: sim >= threshold for i, sim in sims.items()}
        covered: dict[int, float] = {}
        # which side to trust: does any of the best keyword candidates hold the query's words?
        probe = sorted(worded, key=lambda i: (-(by_id[i].text_score or 0.0), -i))[: ranking.COVERAGE_PROBE]
        # texts are read as their coverage is needed (most never are): the probe's now
        norms = tx.norm_texts(worded if explain is not None else probe)
        unread = set(worded) - norms.keys()
        high: dict[int, float] = {}  # relevance at full coverage, once alpha is known

        def coverage_of(item: int) -> float:  # the costly part of relevance: only where it is needed
            if item not in covered:
                if item in unread:  # with it, the unread texts the ranking is likeliest to need next
                    batch = [
                        item,
                        *heapq.nlargest(NORM_BATCH - 1, unread - {item}, key=lambda i: high.get(i, 0.0)),
                    ]
                    norms.update(tx.norm_texts(batch))
                    unread.difference_update(batch)
                covered[item] = found.coverage(norms[item]) if item in norms else 1.0
            return covered[item]

        alpha = ranking.alpha_for(max((coverage_of(i) for i in probe), default=0.0))

        parts = {  # each side of relevance at full coverage, computed once (ranking.mix)
            i: ranking.relevance_parts(embedder, hit.vector_score, hit.text_score, text_range, cosine_range)
            for i, hit in ((i, by_id[i]) for i in passes)
        }

        def relevance(item: int) -> float:
            return ranking.mix(parts[item], alpha, coverage_of(item))

        found_time = when.spans(query, parse_iso(tx.now), TIME_YEARS)
        timely = (
            {b.id: _timely(found_time, b.created_at) for b in briefs if passes[b.id]} if found_time else {}
        )
        kept = {
            b.id: ranking.score(1.0, b.importance, b.access_count) * timely.get(b.id, 1.0)
            for b in briefs
            if passes[b.id]
        }
        # relevance lies between its value at coverage 0 and 1: coverage is read only where
        # the first results (or the contenders for them) depend on it (context.Bounded)
        high.update((i, ranking.mix(part, alpha)) for i, part in parts.items())
        rels = context.Bounded(
            {i: ranking.mix(part, alpha, 0.0) for i, part in parts.items()}, high, relevance
        )
        # conversation context: a memory borrows from the memories stored beside it (search/context.py),
        # read only for the candidates that can still reach the first `limit`; a neighbour under
        # the threshold lends too, at most the best relevance with full coverage
        ceiling = max(high.values(), default=0.0)
        near = context.neighbours(tx, context.contenders(rels, kept, CONTEXT_SHARE, limit, ceiling))
        # the diversity pool (`_diverse`) is the most any caller reads; with `explain`, all of them
        lent = context.lend_best(
            rels, near, CONTEXT_SHARE, kept, len(kept) if explain is not None else _pool(limit)
        )
        scored = []
        for brief in briefs:
            if brief.id not in lent:
                if explain is not None and not passes[brief.id]:
                    explain.count("below the similarity threshold")
                continue
            hit, sim = by_id[brief.id], sims[brief.id]
            scored.append((lent[brief.id] * kept[brief.id], sim, brief.id))  # = ranking.score(lent, ...)
            if explain is not None:
                coverage = covered[brief.id]
                sides = ranking.relevance_parts(
                    embedder, hit.vector_score, hit.text_score, text_range, cosine_range, coverage
                )
                _explain_hit(
                    explain, brief, sim, coverage, sides, rels[brief.id], lent[brief.id], scored[-1][0]
                )
                if found_time:
                    explain.factors[brief.id]["time"] = timely[brief.id]
        if explain is not None:
            explain.stage = "assoc"
            explain.count("outside the searched domains or projects", len(by_id) - len(briefs))
            explain.params.update(
                threshold=threshold, alpha=alpha, embedder=embedder or "none", diversity=DIVERSITY,
                text_low=text_range[0], text_best=text_range[1],
                cosine_low=cosine_range[0], cosine_best=cosine_range[1],
            )  # fmt: skip
        scored.sort(key=lambda t: (-t[0], -t[2]))
        dim = call.runtime.embedding.dim if call.runtime.embedding is not None else 0
        top = _diverse(tx, scored, kept, embedder, dim, limit, explain)
        chosen = replace(candidates, ids=[i for _, _, i in top], limit=len(top) or 1)
        rows = {row.id: row for row in tx.query_items(viewer, chosen)}
        memories = [domains.to_memory(rows[i], score=score, similarity=sim) for score, sim, i in top]
        return memories, len(kept)

    candidates = scoped.restrict(where)
    (memories, total), note = await retrieve(
        call, query, lambda tx: scoped.viewer(tx, call), work, pending=PENDING_NOTE,
        kinds=tuple(where.kinds) or (Kind.MEMORY,), project_id=project_id, k_txt=CANDIDATES,
        k_vec=CANDIDATES, k_final=CANDIDATES, alpha=ALPHA, explain=explain,
    )  # fmt: skip
    return memories, total, note


def _timely(found: Sequence[when.Span], created_at: str) -> float:
    """The time weight of a memory created at `created_at` for a query naming `found`."""
    near = when.nearness(parse_iso(created_at), found, TIME_BEFORE, TIME_AFTER)
    return (1.0 + TIME_BOOST * near) / (1.0 + TIME_BOOST)


def _diverse(
    tx: Tx,
    scored: list[tuple[float, float, int]],
    weights: dict[int, float],
    embedder: str | None,
    dim: int,
    limit: int,
    explain: Explanation | None,
) -> list[tuple[float, float, int]]:
    """The first `limit` of `scored` (score, similarity, id; best first) chosen for diversity
    among the best 2 · limit (search/diversity.py), each with its diversified score."""
    pool = scored[: _pool(limit)]
    base = calibration.baseline(embedder, "passage") if embedder is not None else None
    if embedder is None or base is None or limit <= 1:
        return scored[:limit]
    ids = [i for _, _, i in pool]
    stored, matrix = calibration.stacked(ids, tx.get_vectors(ids, embedder), dim)
    vectors = dict(zip(stored, matrix, strict=True))  # a damaged one is redundant with nothing
    sim = {i: s for _, s, i in pool}
    chosen = diversity.diversify(
        ids, {i: v for v, _, i in pool}, weights, vectors, base.median, DIVERSITY, limit
    )
    if explain is not None:
        for i, value, redundancy in chosen:
            explain.factors[i]["redundancy"] = redundancy
            explain.final[i] = value
    return [(value, sim[i], i) for i, value, _ in chosen]


def _pool(limit: int) -> int:
    """How many of the best-scored results `_diverse` chooses the first `limit` among."""
    return max(2 * limit, DIVERSITY_POOL)


def _explain_hit(
    explain: Explanation,
    brief: ItemBrief,
    sim: float,
    coverage: float,
    parts: tuple[float, float | None],
    rel: float,
    lent: float,
    score: float,
) -> None:
    """The rerank factors of one kept hit (ranking.py's formula, term by term)."""
    explain.factors[brief.id] = {
        "similarity": sim,
        "coverage": coverage,
        "text_part": parts[0],
        "vector_part": "none" if parts[1] is None else parts[1],
        "relevance": rel,
        "in_context": lent,
        "importance": brief.importance,
        "usage": ranking.usage(brief.access_count),
        "access_count": brief.access_count,
    }
    explain.final[brief.id] = score


async def memory_search(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    if args.query is None or not args.query.strip():
        raise invalid("query is required to search")
    where = ItemQuery(
        kinds=(Kind.MEMORY,),
        tags_any=args.tags or (),
        categories=[args.category] if args.category else (),
    )
    projects = [args.project_id] if args.project_id else None
    only_project = args.project_id is not None and args.include_domains == ["project"]
    memories, _, note = await ranked(
        call,
        args.query,
        where,
        scope(args.include_domains, projects, args.session_id),
        args.limit,
        args.threshold,
        PROJ.require(args.project_id)
        if only_project and args.project_id
        else None,  # candidates from it alone
    )
    return m.MemoryOutput(action="search", memories=memories, note=note)


def _filters(args: m.SearchInput) -> tuple[ItemQuery, Sequence[str] | None, Sequence[str] | None]:
    f = args.filters or m.SearchFilters.model_validate({})
    if f.importance_min is not None and f.importance_max is not None and f.importance_min > f.importance_max:
        raise invalid("filters.importance_min is greater than filters.importance_max")
    where = ItemQuery(
        kinds=(Kind.MEMORY,),
        categories=f.categories or (),
        importance_min=f.importance_min,
        importance_max=f.importance_max,
    )
    return where, f.domains, f.project_ids


def _time(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    try:
        return isoformat(parse_iso(value))
    except ValueError:
        raise invalid(f"{name} must be an ISO-8601 date-time such as 2024-01-01T00:00:00Z") from None


async def _filtered(
    call: Call,
    args: m.SearchInput,
    queries: list[ItemQuery],
    in_domains: Sequence[str] | None,
    projects: Sequence[str] | None,
) -> tuple[list[m.Memory], int]:
    """A filter search ordered in the store: the queries' results in turn, up to `limit`."""
    scoped = filter_scope(in_domains, projects)

    def work(tx: Tx) -> tuple[list[m.Memory], int]:
        viewer = scoped.viewer(tx, call)
        rows: list[ItemRow] = []
        for query in queries:
            seen = [r.id for r in rows]
            found = tx.query_items(viewer, replace(scoped.restrict(query), limit=args.limit + len(seen)))
            rows += [r for r in found if r.id not in seen][: args.limit - len(rows)]
        total = tx.count_items(viewer, replace(scoped.restrict(queries[-1]), order="id_asc"), cap=MAX_TOTAL)
        return [domains.to_memory(r) for r in rows], total

    return await call.read(work)


async def similar(call: Call, args: m.SearchInput) -> tuple[list[m.Memory], int, str | None]:
    if args.memory_id is None:
        raise invalid("memory_id is required for a similar search")
    engine, embedding = call.runtime.search, call.runtime.embedding
    if engine is None or embedding is None:
        raise MemhubError(
            ErrorKind.UNAVAILABLE, "similar search needs an embedder (start memhub with --embedder e5)"
        )
    item_id = MEM.require(args.memory_id)
    where, in_domains, projects = _filters(args)
    scoped = filter_scope(in_domains, projects)

    def source(tx: Tx) -> tuple[ItemRow, bytes | None, Viewer]:
        row = domains.get_memory(tx, call.principal, args.memory_id)
        return row, tx.get_vector(row.id, embedding.id), scoped.viewer(tx, call)

    note = await call.catch_up(PENDING_NOTE, search=False)
    row, blob, viewer = await call.read(source)
    if blob is None and not embedding.ready:  # its vector needs the model: do not wait for the load
        return [], 0, note or "the embedding model is not loaded yet: ask again in a moment"
    stored, sound = calibration.stacked([row.id], {row.id: blob} if blob else {}, embedding.dim)
    vec = sound[0] if stored else (await embedding.embed_passages([row.body]))[0]  # none, or damaged
    hits = await engine.nearest(viewer, vec, k=args.limit * 4 + 1, kinds=(Kind.MEMORY,))
    cosines = {i: cos for i, cos in hits if i != item_id}

    def work(tx: Tx) -> tuple[list[m.Memory], int]:
        rows = tx.query_items(
            viewer, replace(scoped.restrict(where), ids=list(cosines), limit=len(cosines) or 1)
        )
        by_id = {r.id: r for r in rows}
        blobs = tx.get_vectors(list(by_id), embedding.id)
        stored, matrix = calibration.stacked(list(by_id), blobs, embedding.dim)
        rows = [by_id[i] for i in stored]  # the matrix's rows, in order
        layout, mine = calibration.parts(embedding.embedder), calibration.profile(row.body)
        scores = ranking.associations(layout, vec, matrix, mine, [r.body for r in rows])
        sims = dict(zip((r.id for r in rows), scores, strict=True))
        kept = sorted((r for r in rows if sims[r.id] >= args.threshold), key=lambda r: (-sims[r.id], r.id))
        chosen = kept[: args.limit]
        return [domains.to_memory(r, score=sims[r.id], similarity=sims[r.id]) for r in chosen], len(kept)

    memories, total = await call.read(work)
    return memories, total, note


async def search(call: Call, args: m.SearchInput) -> m.SearchOutput:
    where, in_domains, projects = _filters(args)
    if args.type in ("semantic", "advanced") and args.query is not None and args.query.strip():
        # by meaning, the vault's notes (its owner's) are found too: one store, one search
        with_notes = replace(where, kinds=(Kind.MEMORY, Kind.NOTE)) if args.type == "semantic" else where
        memories, total, note = await ranked(
            call,
            args.query,
            with_notes,
            filter_scope(in_domains, projects),
            args.limit,
            args.threshold,
        )
        return m.SearchOutput(type=args.type, memories=memories, total=total, note=note)
    elif args.type == "semantic":
        raise invalid("query is required for a semantic search")
    elif args.type == "tags":
        if not args.tags:
            raise invalid("tags are required for a tags search")
        every = replace(where, tags_all=args.tags, order="id_desc")  # memories with all the tags first
        some = replace(where, tags_any=args.tags, order="id_desc")
        memories, total = await _filtered(
            call, args, [every, some] if len(args.tags) > 1 else [some], in_domains, projects
        )
    elif args.type == "timerange":
        start, end = _time(args.start_time, "start_time"), _time(args.end_time, "end_time")
        if start is None and end is None:
            raise invalid("start_time or end_time is required for a timerange search")
        if start is not None and end is not None and start > end:
            raise invalid("start_time is after end_time")
        timed = replace(where, created_from=start, created_to=end, order="created_desc")
        memories, total = await _filtered(call, args, [timed], in_domains, projects)
    elif args.type == "advanced":
        by_importance = replace(where, order="importance_desc")
        memories, total = await _filtered(call, args, [by_importance], in_domains, projects)
    else:
        memories, total, note = await similar(call, args)
        return m.SearchOutput(type=args.type, memories=memories, total=total, note=note)
    return m.SearchOutput(type=args.type, memories=memories, total=total)
