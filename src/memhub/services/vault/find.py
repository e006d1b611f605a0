"""vault_find: Stage 0 (normalised match), Stage 1 (loose match), Stage 1.5 (integration).

Nodes are the heading sections of notes (see notes.py). Stage 0 keeps a node whose folded
text (NFKC, case folded, whitespace collapsed; the file name counts as part of the first
section) contains the folded query. Stage 1 keeps a node whose loose score (the mean
share of each query term's keys it holds; katakana = hiragana, English lightly stemmed,
Japanese by character bigrams) is at least LOOSE_MIN_SCORE. Budgets: `time_ms` (default
60000) and `max_candidates` (default 200) end the walk early, with `cutoff_reason`.
If a `scope` finds nothing, the whole vault is searched once more (`scope_expanded`).

Stage 1.5 merges candidates of one note whose line ranges overlap or touch into
*integrated candidates* and judges them:
- signal_coverage.normalized: 1.0 if Stage 0 matched anywhere, else 0.0;
  signal_coverage.loose: share of the query's terms present in some candidate;
- file_bias_ratio: share of the integrated candidates held by the note holding most;
- gap_ranges_count: holes between integrated candidates of the same note;
- sufficiency_score = 0.6 * max(normalized, loose) + 0.4 * best candidate score;
- integration_status: blocked (no candidate), ready (sufficiency >= SUFFICIENCY_MIN, no
  gaps, not cut off by time or a hard limit) or needs_followup.
next_actions: ready -> vault_read of the best candidates, then stop; needs_followup ->
vault_scan of the best note from line 1 when its evidence has gaps or is concentrated
there, vault_read of the best candidates, vault_find again when time ran out; blocked -> [].
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from memhub.services.runtime import Call
from memhub.services.vault import config as c
from memhub.services.vault import models as m
from memhub.services.vault.notes import LooseQuery, fold, loose_query
from memhub.services.vault.ranges import merge
from memhub.services.vault.scope import notes_in_scope
from memhub.services.vault.service import run
from memhub.services.vault.state import VaultState


@dataclass(frozen=True, slots=True)
class Candidate:
    path: str
    start: int
    end: int
    stage: int
    score: float
    terms: frozenset[int]  # indexes of the loose terms the node holds


@dataclass
class Walk:
    files: int = 0
    nodes: int = 0
    warnings: int = 0
    candidates: list[Candidate] = field(default_factory=list)
    cutoff: str | None = None


def _walk(
    state: VaultState, scope: m.FindScope | None, exact: str, loose: LooseQuery, cap: int, deadline: float
) -> Walk:
    walk = Walk()
    relative_dir = scope.relative_dir if scope else None
    glob = scope.glob if scope else None
    everything = set(range(len(loose.terms)))
    for rel, st in notes_in_scope(state, relative_dir, glob):
        if walk.files >= c.FIND_HARD_LIMIT_FILES:
            walk.cutoff = "hard_limit"
            break
        if time.monotonic() > deadline:
            walk.cutoff = "time_budget"
            break
        walk.files += 1
        note = state.cache.get(state.vault.root, rel, st.st_mtime_ns, st.st_size)
        if note is None:
            walk.warnings += 1
            continue
        walk.nodes += len(note.spans)
        if exact not in note.exact and (not loose.terms or loose.score(note.loose) < c.LOOSE_MIN_SCORE):
            continue  # no node of this note can match: a section holds a part of the note's keys
        for span in note.spans:
            if exact in note.exact[span.a : span.b]:
                walk.candidates.append(Candidate(rel, span.start, span.end, 0, 1.0, frozenset(everything)))
            elif loose.terms:
                text = note.loose[span.a : span.b]
                score = loose.score(text)
                if score >= c.LOOSE_MIN_SCORE:
                    terms = frozenset(loose.keys_found(text))
                    walk.candidates.append(Candidate(rel, span.start, span.end, 1, round(score, 4), terms))
            if len(walk.candidates) >= cap:
                walk.cutoff = "candidate_cap"
                return walk
    return walk


@dataclass(frozen=True, slots=True)
class Integrated:
    path: str
    start: int
    end: int
    score: float


def _integrate(candidates: list[Candidate]) -> list[Integrated]:
    by_path: dict[str, list[Candidate]] = {}
    for cand in candidates:
        by_path.setdefault(cand.path, []).append(cand)
    out: list[Integrated] = []
    for path, group in by_path.items():
        for start, end in merge(((x.start, x.end) for x in group), 10**9):
            best = max(x.score for x in group if start <= x.start and x.end <= end)
            out.append(Integrated(path, start, end, best))
    return out


def _read(item: Integrated, confidence: float) -> m.NextAction:
    params = {"path": item.path, "range": {"start_line": item.start, "end_line": item.end}}
    return m.NextAction(type="vault_read", confidence=round(confidence, 3), params=params)


def _judge(
    args: m.FindInput, walk: Walk, loose: LooseQuery, budget_ms: int
) -> tuple[dict[str, Any], list[m.NextAction]]:
    integrated = _integrate(walk.candidates)
    counts: dict[str, int] = {}
    for item in integrated:
        counts[item.path] = counts.get(item.path, 0) + 1
    bias = round(max(counts.values()) / len(integrated), 4) if integrated else 0.0
    gaps = sum(n - 1 for n in counts.values())
    normalized = 1.0 if any(x.stage == 0 for x in walk.candidates) else 0.0
    found_terms: set[int] = set()
    for cand in walk.candidates:
        found_terms |= cand.terms
    loose_cov = round(len(found_terms) / len(loose.terms), 4) if loose.terms else normalized
    best = max((x.score for x in integrated), default=0.0)
    sufficiency = round(0.6 * max(normalized, loose_cov) + 0.4 * best, 4) if integrated else 0.0
    cut_short = walk.cutoff in ("time_budget", "hard_limit")
    if not integrated:
        status = "blocked"
    elif sufficiency >= c.SUFFICIENCY_MIN and gaps == 0 and not cut_short:
        status = "ready"
    else:
        status = "needs_followup"
    ranked = sorted(integrated, key=lambda x: (-x.score, x.path, x.start))
    actions: list[m.NextAction] = []
    if status == "ready":
        actions = [_read(item, item.score) for item in ranked[:3]]
        actions.append(m.NextAction(type="stop", confidence=sufficiency, params=None))
    elif status == "needs_followup":
        top = ranked[0].path
        if counts[top] > 1 or bias > c.FILE_BIAS_MAX:
            actions.append(m.NextAction(type="vault_scan", confidence=0.7, params={"path": top}))
        actions += [_read(item, item.score * 0.8) for item in ranked[:2]]
    if cut_short:
        retry: dict[str, Any] = {
            "query": args.query,
            "budget": {"time_ms": min(c.FIND_MAX_TIME_MS, budget_ms * 2)},
        }
        folder = str(PurePosixPath(ranked[0].path).parent) if integrated else "."
        if folder != ".":
            retry["scope"] = {"relative_dir": folder}
        actions.append(m.NextAction(type="vault_find", confidence=0.5, params=retry))
    summary = {
        "integrated_candidates": len(integrated),
        "signal_coverage": {"normalized": normalized, "loose": loose_cov},
        "file_bias_ratio": bias,
        "gap_ranges_count": gaps,
        "sufficiency_score": sufficiency,
        "integration_status": status,
    }
    return summary, actions


async def vault_find(call: Call, args: m.FindInput) -> m.FindOutput:
    def work(state: VaultState) -> m.FindOutput:
        trace_id = "vf_" + uuid.uuid4().hex[:16]
        budget_ms = (args.budget.time_ms if args.budget else None) or c.FIND_DEFAULT_TIME_MS
        cap = (args.budget.max_candidates if args.budget else None) or c.FIND_DEFAULT_MAX_CANDIDATES
        deadline = time.monotonic() + budget_ms / 1000
        exact, loose = fold(args.query), loose_query(args.query)
        walk = _walk(state, args.scope, exact, loose, cap, deadline)
        expanded = False
        scoped = args.scope is not None and (args.scope.relative_dir or args.scope.glob)
        if scoped and not walk.candidates and walk.cutoff is None:
            wider = _walk(state, None, exact, loose, cap, deadline)
            wider.files += walk.files
            wider.nodes += walk.nodes
            wider.warnings += walk.warnings
            walk, expanded = wider, True
        judged, actions = _judge(args, walk, loose, budget_ms)
        summary = m.FindSummary(
            scanned_files=walk.files,
            scanned_nodes=walk.nodes,
            candidates=len(walk.candidates),
            warnings=walk.warnings,
            max_stage_applied=1 if loose.terms else 0,
            scope_expanded=expanded,
            cutoff_reason=walk.cutoff,  # type: ignore[arg-type]
            **judged,
        )
        call.detail.update(
            trace_id=trace_id,
            candidates=summary.candidates,
            integrated_candidates=summary.integrated_candidates,
            file_bias_ratio=summary.file_bias_ratio,
            gap_ranges_count=summary.gap_ranges_count,
            sufficiency_score=summary.sufficiency_score,
            integration_status=summary.integration_status,
            next_actions=[a.type for a in actions],
        )
        return m.FindOutput(trace_id=trace_id, summary=summary, next_actions=actions)

    return await run(call, work)
