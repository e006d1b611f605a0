"""Boundary-first retrieval: `pce.memory.search` and the ranking `activate` shares.

Before anything is searched, the caller's `allow` tags are checked against the policy's
boundary classes: the search's viewer (the store's one visibility filter) holds only the
classes those tags may receive, plus the classes whose escalation is `human_review` (their
claims are then withheld and the escalation recorded). `secret` is never in it. Results are
the shared hybrid engine's (policy `retrieval.hybrid`), reranked by `g` (ranking.py). A
candidate whose combined relevance is 0 (no text match and no positive cosine, e.g. every
claim the vector side lists for an unrelated query) is not retrieved: not by search, not into
an active context.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from memhub.core.clock import parse_iso
from memhub.core.errors import invalid
from memhub.core.hashing import sha256_hex
from memhub.core.ids import CLM
from memhub.core.models import Kind, Viewer
from memhub.policy.model import CLASSES, SCOPES, Policy, allowed_classes, ttl_seconds
from memhub.policy.redact import PII_KINDS, SECRET_KINDS, redact
from memhub.search.engine import MAX_K
from memhub.search.explain import Explanation
from memhub.search.pipeline import Candidates
from memhub.services import access, graph
from memhub.services.pce import models as m
from memhub.services.pce import ranking
from memhub.services.pce.claims import (
    MENTIONS,
    RELATION,
    STORE_SCOPES,
    age_days,
    to_claim,
)
from memhub.services.pce.config import config
from memhub.services.pce.errors import BoundaryDenied, PolicyMissing
from memhub.services.pce.policies import current
from memhub.services.retrieval import retrieve
from memhub.services.runtime import Call
from memhub.store.base import ItemQuery, ItemRow, Tx

PENDING_NOTE = "claims stored just now are still being embedded; search again in a moment"

DEFAULT_ALLOW = ("answer:task",)
_Gathered = tuple[dict[int, ranking.Components], list[int], list[ItemRow], Viewer]
MAX_ENTITIES = 21  # nodes of one claim's entity walk (the claim included)


@dataclass(frozen=True)
class Ranked:
    row: ItemRow
    text: str  # what may be shown (pii redacted per the policy)
    score: float
    scores: m.Scoring


@dataclass(frozen=True)
class Ranking:
    policy: Policy
    items: list[Ranked]
    allowed: frozenset[str]
    tags: tuple[str, ...]
    viewer: Viewer
    note: str | None = None  # what the ranking may have missed (runtime.Call.catch_up)


def check_tags(allow: list[str] | None) -> tuple[str, ...]:
    """The caller's purpose tags (default answer:task). Wildcards are for policies: a caller
    declaring `*` or `tool:*` is BOUNDARY_DENIED rather than let through."""
    tags = tuple(dict.fromkeys(allow)) if allow else DEFAULT_ALLOW
    wild = [t for t in tags if "*" in t]
    if wild:
        raise BoundaryDenied(
            "allow tags name a concrete purpose (answer:task, tool:contact-lookup);"
            " wildcards are for policies",
            tags=wild[:5],
        )
    return tags


async def policy_in_force(call: Call) -> Policy:
    policy = await call.read(current)
    if policy.builtin and config(call).require_policy:
        raise PolicyMissing("no policy has been applied: run pce.memory.policy.apply")
    return policy


def shown_text(policy: Policy, row: ItemRow) -> str:
    """A claim's text as it may be shown: every secret masked, its class's `redact` kinds
    masked, and any e-mail address or phone number in a public or internal claim (one stored
    before the detectors found it: upsert refuses such a claim today). Search and activate
    results also pass the toolset's output filter; the active-context resource does not."""
    kinds: set[str] = {*SECRET_KINDS, *policy.doc.boundary(row.boundary_class).redact}
    if row.boundary_class in ("public", "internal"):
        kinds.update(PII_KINDS)
    return redact(row.body, kinds)[0]


def boundary_viewer(tx: Tx, call: Call, classes: frozenset[str]) -> Viewer:
    return access.viewer(tx, call.principal, sessions="current", boundaries=classes - {"secret"})


def _scope_query(tx: Tx, call: Call, scopes: Sequence[str] | None) -> ItemQuery:
    wanted = tuple(dict.fromkeys(scopes)) if scopes else SCOPES
    project = (
        tx.get_project_by_name(call.principal.default_project) if call.principal.default_project else None
    )
    return ItemQuery(
        kinds=(Kind.CLAIM,),
        scopes=[STORE_SCOPES[s] for s in wanted],
        scope_projects=[project.id] if project is not None else [],
    )


async def rank(
    call: Call,
    query: str,
    scopes: Sequence[str] | None,
    allow: list[str] | None,
    as_of: str,
    explain: Explanation | None = None,
) -> Ranking:
    """Every claim the caller may receive for `query`, best first (boundary-first)."""
    tags = check_tags(allow)
    policy = await policy_in_force(call)
    doc = policy.doc
    allowed = allowed_classes(doc, list(tags))
    review = frozenset(
        c
        for c in CLASSES
        if c != "secret" and c not in allowed and doc.boundary(c).escalation == "human_review"
    )
    hybrid = doc.retrieval.hybrid

    def gather(tx: Tx, found: Candidates) -> _Gathered:
        """The rerank's reads, in the pipeline's snapshot: the best `k_final` by the fused
        score (`by_best` on each side), then those in the asked scopes."""
        parts = ranking.components(found.hits, hybrid.alpha)
        pool = sorted(parts, key=lambda i: (-parts[i].combined, i))[: hybrid.k_final]
        where = _scope_query(tx, call, scopes)
        rows = tx.query_items(found.viewer, replace(where, ids=pool, limit=len(pool) or 1))
        return parts, pool, rows, found.viewer

    (parts, pool, rows, viewer), note = await retrieve(
        call, query, lambda tx: boundary_viewer(tx, call, allowed | review), gather, pending=PENDING_NOTE,
        kinds=(Kind.CLAIM,), k_txt=hybrid.k_txt, k_vec=hybrid.k_vec,
        k_final=min(hybrid.k_txt + hybrid.k_vec, MAX_K), alpha=hybrid.alpha, explain=explain,
    )  # fmt: skip
    rerank = doc.retrieval.rerank
    items: list[Ranked] = []
    withheld: list[str] = []
    for row in rows:
        part = parts[row.id]
        if part.combined <= 0:
            continue  # matched neither the text nor the vector side: no relevance, not retrieved
        pce_scope = row.attrs.get("pce_scope", "principle")
        age = age_days(as_of, row.created_at)
        if age * 86400 > ttl_seconds(doc.scope(pce_scope).ttl):
            if explain is not None:
                explain.count("past its scope's TTL")
            continue  # past its scope's TTL under the policy in force
        if row.boundary_class not in allowed:
            withheld.append(CLM(row.id))
            if explain is not None:
                explain.count("withheld for human review (boundary class)")
            continue
        rec = ranking.recency(age, rerank.half_life(row.category or "fact"))
        q = ranking.quality_factor(row.quality, rerank.use_quality)
        g = q * rec
        scores = m.Scoring(
            text=part.text, vector=part.vector, combined=part.combined, quality=row.quality, recency=rec, g=g
        )
        items.append(Ranked(row, shown_text(policy, row), part.combined * g, scores))
        if explain is not None:
            explain.factors[row.id] = {
                "text_part": part.text, "vector_part": part.vector, "combined": part.combined,
                "quality": row.quality, "quality_factor": q, "age_days": age,
                "half_life_days": rerank.half_life(row.category or "fact"), "recency": rec, "g": g,
            }  # fmt: skip
            explain.final[row.id] = part.combined * g
    if explain is not None:
        explain.stage = "pce"
        explain.count("below the policy's k_final", max(0, len(parts) - len(pool)))
        explain.count("outside the asked scopes", len(pool) - len(rows))
        explain.params.update(
            alpha=hybrid.alpha, k_final=hybrid.k_final, use_quality=str(rerank.use_quality),
            policy_version=policy.version, normalisation="score / best score per side",
        )  # fmt: skip
    items.sort(key=lambda r: ranking.sort_key(r.score, r.row.created_at, r.row.id))
    call.detail["boundary"] = {
        "allow": list(tags)[:10],
        "classes": sorted(allowed),
        "returned_classes": sorted({r.row.boundary_class for r in items}),
        "withheld": len(withheld),
        "escalation": "human_review" if withheld else None,
        "escalated_ids": withheld[:50],
        "policy_version": policy.version,
    }
    return Ranking(policy, items, allowed, tags, viewer, note)


def scored_item(item: Ranked, include_meta: bool, entities: Sequence[m.Evidence] = ()) -> m.ScoredItem:
    if not include_meta:
        return m.ScoredItem(claim=to_claim(item.row, item.text), score=item.score)
    return m.ScoredItem(
        claim=to_claim(item.row, item.text),
        score=item.score,
        scores=item.scores,
        evidences=[*evidences(item.row), *entities],
        reason=_reason(item.scores),
    )


def entity_evidence(tx: Tx, viewer: Viewer, claim_ids: Sequence[int]) -> dict[int, list[m.Evidence]]:
    """The entities each claim mentions and those related to them: the one graph walk, two
    hops over `mentions` and `relation` links, through the same visibility filter."""
    out: dict[int, list[m.Evidence]] = {}
    for claim_id in claim_ids:
        walked = graph.walk(tx, viewer, [claim_id], (MENTIONS, RELATION), depth=2, max_nodes=MAX_ENTITIES)
        ids = walked.found()
        query = ItemQuery(kinds=(Kind.ENTITY,), ids=ids, limit=len(ids) or 1)
        rows = {row.id: row for row in tx.query_items(viewer, query)}
        out[claim_id] = [
            m.Evidence(
                id=f"ent_{i}",
                source_type="entity",
                source_id=str(rows[i].attrs.get("entity_id", "")),
                snippet=rows[i].title,
                via=walked.reached[i].via,
                depth=walked.reached[i].depth,
            )
            for i in ids
            if i in rows
        ]
    return out


def evidences(row: ItemRow) -> list[m.Evidence]:
    prov: dict[str, Any] = row.attrs.get("provenance") or {}
    out = []
    git = prov.get("git") or {}
    if git.get("commit"):
        out.append(m.Evidence(source_type="git", source_id=git["commit"], at=prov.get("at")))
    if prov.get("url"):
        out.append(m.Evidence(source_type="url", source_id=prov["url"], at=prov.get("at")))
    if not out:
        out.append(m.Evidence(source_type="provenance", source_id=prov.get("actor"), at=prov.get("at")))
    return out


def _reason(scores: m.Scoring) -> str:
    sides = [name for name, value in (("text", scores.text), ("vector", scores.vector)) if value > 0]
    return f"matched by {' and '.join(sides) or 'neither side'}; g={scores.g:.3f}"


# -- cursors ------------------------------------------------------------------------------------


CURSOR_LIFETIME = timedelta(hours=1)  # a cursor's `at` may not be older (nor in the future)


def encode_cursor(body: dict[str, Any]) -> str:
    raw = json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, Any]:
    try:
        body = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise invalid("cursor is not a next_cursor this server gave") from None
    if not isinstance(body, dict):
        raise invalid("cursor is not a next_cursor this server gave")
    return body


def fingerprint(*parts: Any) -> str:
    return sha256_hex(json.dumps(parts, sort_keys=True, ensure_ascii=True))[:16]


def _pack(ids: list[int]) -> str:
    """Sorted ids as base-36 deltas: `1.2.a` (a cursor stays short)."""
    out, last = [], 0
    for item in sorted(set(ids)):
        out.append(_b36(item - last))
        last = item
    return ".".join(out)


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        n, rest = divmod(n, 36)
        text = digits[rest] + text
        if n == 0:
            return text


def _unpack(text: str) -> list[int]:
    total, out = 0, []
    for part in filter(None, text.split(".")):
        total += int(part, 36)
        out.append(total)
    return out


async def search(call: Call, args: m.SearchInput) -> m.SearchResult:
    """Paging: the cursor holds the query's fingerprint, the time the ranking was made at (so
    recency is the same on every page) and the ids already returned. A later page is the
    ranking again without those and without claims written since the first page: no claim is
    returned twice, and none is skipped because scores moved (BM25 statistics change as
    claims are written) between pages."""
    print_ = fingerprint(
        "search", args.query, sorted(args.scope or SCOPES), sorted(args.allow or DEFAULT_ALLOW)
    )
    as_of, returned = call.runtime.now(), []
    if args.cursor is not None:
        body = decode_cursor(args.cursor)
        if (
            body.get("f") != print_
            or not isinstance(body.get("at"), str)
            or not isinstance(body.get("r"), str)
        ):
            raise invalid("cursor belongs to another query (same query, scope and allow are needed)")
        try:
            as_of, returned = body["at"], _unpack(body["r"])
            age = parse_iso(call.runtime.now()) - parse_iso(as_of)
        except ValueError:
            raise invalid("cursor is not a next_cursor this server gave") from None
        if not timedelta(0) <= age <= CURSOR_LIFETIME:  # the cursor is not signed: bound what it can ask
            raise invalid("cursor has expired (a page cursor lives one hour): search again")
    ranked = await rank(call, args.query, args.scope, args.allow, as_of)
    done = set(returned)
    # claims written after the first page wait for a new search
    items = [r for r in ranked.items if r.row.id not in done and r.row.created_at <= as_of]
    page, rest = items[: args.top_k], items[args.top_k :]
    cursor = None
    if rest:
        cursor = encode_cursor({"f": print_, "at": as_of, "r": _pack([*returned, *(r.row.id for r in page)])})
    call.detail["returned"] = [CLM(r.row.id) for r in page]
    found: dict[int, list[m.Evidence]] = {}
    if args.include_meta and page:
        found = await call.read(lambda tx: entity_evidence(tx, ranked.viewer, [r.row.id for r in page]))
    version = ranked.policy.version
    return m.SearchResult(
        data=m.SearchData(
            items=[scored_item(r, args.include_meta, found.get(r.row.id, ())) for r in page],
            next_cursor=cursor,
            has_more=bool(rest),
            policy_version=version,
            note=ranked.note,
        ),
        policy_version=version,
        request_id=call.request_id,
        trace_id=call.trace_id,
    )
