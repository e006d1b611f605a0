"""One search box across the five toolsets, each hit with the explanation of its rank.

Every group is searched by its own toolset's code (the same functions its tools call), with
an `Explanation` passed down the pipeline: memories and vault notes by the assoc `search`
tool's semantic ranking, claims by `pce.memory.search`'s boundary-first ranking, decisions
by `search_decisions`' graph-first ranking, topics and logs by the shared hybrid engine (the
discussion toolset searches them by substring; the fused score is what ranks them here).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import anyio
from pydantic import ValidationError

from memhub.core.errors import MemhubError
from memhub.core.ids import DEC
from memhub.core.models import Kind, Principal
from memhub.search.explain import Explanation
from memhub.search.fusion import FusedHit
from memhub.search.pipeline import Candidates
from memhub.services import access
from memhub.services.assoc import models as assoc_models
from memhub.services.assoc import search as assoc_search
from memhub.services.decisions import models as decision_models
from memhub.services.decisions import service as decisions
from memhub.services.pce import retrieval
from memhub.services.retrieval import retrieve
from memhub.services.runtime import Call, Runtime
from memhub.store.base import ItemQuery, ItemRow, Tx

GROUPS = ("memory", "vault note", "claim", "decision", "topic/log")
PER_GROUP = 10
TOPIC_KINDS = ("topic", "log")
SEMANTIC = assoc_models.SearchInput.model_validate({"type": "semantic", "query": "x"})  # the tool's defaults


@dataclass(frozen=True)
class Hit:
    group: str
    item_id: int
    public_id: str
    title: str
    snippet: str
    score: float
    scope: str
    project: str | None
    status: str | None = None


@dataclass
class Found:
    query: str
    groups: dict[str, list[Hit]] = field(default_factory=dict)
    explanations: dict[str, Explanation] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)  # group -> why it was not searched


def _snippet(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _projects(tx: Tx, rows: list[ItemRow]) -> dict[int, str]:
    names = {}
    for pid in {r.project_id for r in rows if r.project_id is not None}:
        row = tx.get_project(pid)
        if row is not None:
            names[pid] = row.name
    return names


async def _read_rows(
    call: Call, ids: list[int], kinds: tuple[str, ...]
) -> tuple[dict[int, ItemRow], dict[int, str]]:
    def work(tx: Tx) -> tuple[dict[int, ItemRow], dict[int, str]]:
        viewer = access.viewer(tx, call.principal, sessions="own")
        rows = tx.query_items(viewer, ItemQuery(kinds=kinds, ids=ids, limit=len(ids) or 1))
        return {r.id: r for r in rows}, _projects(tx, rows)

    return await call.read(work)


def _terms(explanation: Explanation, rows: dict[int, ItemRow]) -> None:
    """Which keyword terms each shown hit contains (the coverage the rerank counted)."""
    for item_id, row in rows.items():
        explanation.found[item_id] = explanation.matched(f"{row.title or ''} {row.body}")


def _hit(
    group: str, row: ItemRow, public: str, score: float, projects: dict[int, str], shown: str | None = None
) -> Hit:
    """`shown`: the text as the toolset may show it (a claim's, masked as pce masks it)."""
    body = row.body if shown is None else shown
    title = (row.title if shown is None else None) or _snippet(body, 80)
    project = projects.get(row.project_id) if row.project_id is not None else None
    return Hit(group, row.id, public, title, _snippet(body), score, row.scope, project, row.status)


async def _memories(call: Call, query: str, found: Found) -> None:
    explain = Explanation()
    where = ItemQuery(kinds=(Kind.MEMORY, Kind.NOTE))
    memories, _, _note = await assoc_search.ranked(
        call, query, where, assoc_search.scope(None, None, None), SEMANTIC.limit, SEMANTIC.threshold,
        explain=explain,
    )  # fmt: skip
    ids = [int(mem.id.split("_", 1)[1]) for mem in memories]
    rows, projects = await _read_rows(call, ids, (Kind.MEMORY, Kind.NOTE))
    _terms(explain, rows)
    for mem, item_id in zip(memories, ids, strict=True):
        row = rows.get(item_id)
        if row is None:
            continue
        group = "vault note" if row.kind == Kind.NOTE else "memory"
        found.groups.setdefault(group, []).append(_hit(group, row, mem.id, mem.score or 0.0, projects))
    found.explanations["memory"] = found.explanations["vault note"] = explain


async def _claims(call: Call, query: str, found: Found) -> None:
    explain = Explanation()
    ranking = await retrieval.rank(call, query, None, None, call.runtime.now(), explain)
    page = ranking.items[:PER_GROUP]
    projects = await call.read(lambda tx: _projects(tx, [r.row for r in page]))
    for r in page:  # the terms a claim matched, read in the text as shown (a masked value stays unsaid)
        explain.found[r.row.id] = explain.matched(r.text)
    found.groups["claim"] = [_hit("claim", r.row, f"clm_{r.row.id}", r.score, projects, r.text) for r in page]
    found.explanations["claim"] = explain


async def _decisions(call: Call, query: str, found: Found) -> None:
    explain = Explanation()
    args = decision_models.SearchInput(query=query, limit=PER_GROUP)
    response = await decisions.search(call, args, explain)
    ids = [DEC.parse(hit.id) for hit in response.results]
    wanted = [i for i in ids if i is not None]
    rows, projects = await _read_rows(call, wanted, (Kind.DECISION,))
    _terms(explain, rows)
    scores = {DEC.parse(hit.id): hit.score for hit in response.results}
    found.groups["decision"] = [
        _hit("decision", rows[i], DEC(i), scores[i], projects) for i in wanted if i in rows
    ]
    found.explanations["decision"] = explain


async def _topics(call: Call, query: str, found: Found) -> None:
    if call.runtime.search is None:
        return
    explain = Explanation()

    def rows_of(tx: Tx, candidates: Candidates) -> tuple[list[FusedHit], dict[int, ItemRow], dict[int, str]]:
        """The fused hits and their rows, in the pipeline's snapshot (the engine's order)."""
        ids = candidates.ids
        viewer = access.viewer(tx, call.principal, sessions="own")
        rows = tx.query_items(viewer, ItemQuery(kinds=TOPIC_KINDS, ids=ids, limit=len(ids) or 1))
        return candidates.hits, {r.id: r for r in rows}, _projects(tx, rows)

    (hits, rows, projects), _note = await retrieve(
        call, query, lambda tx: access.viewer(tx, call.principal), rows_of, pending="",
        kinds=TOPIC_KINDS, k_final=PER_GROUP, explain=explain,
    )  # fmt: skip
    explain.stage = "engine"
    explain.final = {h.item_id: h.combined for h in hits}
    _terms(explain, rows)
    found.groups["topic/log"] = [
        _hit("topic/log", rows[h.item_id], f"{rows[h.item_id].kind}_{h.item_id}", h.combined, projects)
        for h in hits
        if h.item_id in rows
    ]
    found.explanations["topic/log"] = explain


TOOLSET_OF = {"memory": "assoc", "claim": "pce", "decision": "decisions", "topic/log": "discussion"}


async def search_all(
    runtime: Runtime, principal: Principal, query: str, states: Mapping[str, object] | None = None
) -> Found:
    """Every group's best hits for `query` as `principal` sees them, with explanations. A group
    whose toolset refuses (no policy applied, say) is reported in `unavailable`."""
    found = Found(query)

    async def one(name: str, step: Callable[[Call, str, Found], Awaitable[None]]) -> None:
        state = (states or {}).get(TOOLSET_OF[name])
        call = Call(runtime, principal, f"dashboard.search.{name}", read_only=True, state=state)
        try:
            await step(call, query, found)
            await call.record("ok")
        except MemhubError as exc:
            found.unavailable[name] = exc.message
            await call.record("error")
        except ValidationError as exc:  # the toolset's own input rules (query length, say)
            found.unavailable[name] = "; ".join(str(e["msg"]) for e in exc.errors()[:2])
            await call.record("error")

    async with anyio.create_task_group() as group:  # the toolsets' searches side by side
        for name, step in (
            ("memory", _memories), ("claim", _claims), ("decision", _decisions), ("topic/log", _topics)
        ):  # fmt: skip
            group.start_soon(one, name, step)
    return found
