"""`pce.memory.activate`: an active context (AC) of ranked claims, readable until it expires.

An AC keeps the claim ids and scores of one ranking, capped per scope by the policy's
`max_tokens` (claims are taken best first; one that does not fit its scope's budget is
skipped). It is read back page by page with `cursor`, or whole as the MCP resource
`pce://active-context/{id}`. Every read goes through the visibility filter again with the
boundary classes of the activation (never secret), and pii is redacted with the policy in
force, so a claim deleted or reclassified since is not shown. Past `expires_at` (default 30
minutes, `MEMHUB_PCE_ACTIVE_CONTEXT_TTL_S`) an AC answers ACTIVE_CONTEXT_EXPIRED, the seed's
410 Gone.
"""

from __future__ import annotations

import json
import re
import secrets
from datetime import timedelta
from typing import Any

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import invalid
from memhub.core.ids import CLM
from memhub.core.models import Kind, Principal
from memhub.policy.model import Policy
from memhub.policy.redact import without_secrets
from memhub.services import access
from memhub.services.pce import models as m
from memhub.services.pce import ranking
from memhub.services.pce.config import config
from memhub.services.pce.errors import ContextExpired, UnknownClaim
from memhub.services.pce.policies import current
from memhub.services.pce.retrieval import (
    Ranked,
    check_tags,
    decode_cursor,
    encode_cursor,
    entity_evidence,
    rank,
    scored_item,
    shown_text,
)
from memhub.services.runtime import Call, Runtime
from memhub.store.base import ActiveContextRow, ItemQuery, Tx

_AC = re.compile(r"^ac_[A-Za-z0-9]{1,64}$")
PURGE_AFTER = timedelta(days=1)  # expired contexts are forgotten this long after expiry


def _params(policy: Policy) -> m.ScoringParams:
    hybrid, rerank = policy.doc.retrieval.hybrid, policy.doc.retrieval.rerank
    return m.ScoringParams(
        alpha=hybrid.alpha, k_txt=hybrid.k_txt, k_vec=hybrid.k_vec, k_final=hybrid.k_final,
        rerank=m.RerankParams(
            use_quality=rerank.use_quality, recency_half_life_days=rerank.recency_half_life_days
        ),
    )  # fmt: skip


def capped(policy: Policy, items: list[Ranked]) -> list[Ranked]:
    """Best first, each scope's claims within that scope's max_tokens."""
    used: dict[str, int] = {}
    kept = []
    for item in items:
        scope = item.row.attrs.get("pce_scope", "principle")
        cost = ranking.estimate_tokens(item.text)
        if used.get(scope, 0) + cost <= policy.doc.scope(scope).max_tokens:
            used[scope] = used.get(scope, 0) + cost
            kept.append(item)
    return kept


def _load(tx: Tx, caller: Principal, context_id: str, now: str) -> ActiveContextRow:
    row = tx.get_active_context(context_id) if _AC.match(context_id) else None
    if row is None or row.owner != caller.id:
        raise UnknownClaim(f"active context {context_id[:70]} not found")
    if now >= row.expires_at:
        raise ContextExpired(
            f"active context {context_id} expired at {row.expires_at} (410 Gone): call activate again",
            expired_at=row.expires_at,
        )
    return row


def _items(tx: Tx, call_principal: Principal, row: ActiveContextRow, policy: Policy) -> list[dict[str, Any]]:
    """The AC's claims as they may be shown now (re-read through the visibility filter)."""
    entries: list[dict[str, Any]] = row.body["claims"]
    ids = [i for e in entries if (i := CLM.parse(e["id"])) is not None]
    viewer = access.viewer(
        tx, call_principal, sessions="own", boundaries=set(row.body["classes"]) - {"secret"}
    )
    found = {
        r.id: r for r in tx.query_items(viewer, ItemQuery(kinds=(Kind.CLAIM,), ids=ids, limit=len(ids) or 1))
    }
    out = []
    entities = entity_evidence(tx, viewer, list(found))
    for entry in entries:
        item_id = CLM.parse(entry["id"])
        rowi = found.get(item_id) if item_id is not None else None
        if rowi is None:
            continue
        ranked = Ranked(rowi, shown_text(policy, rowi), entry["score"], m.Scoring(**entry["scores"]))
        out.append(
            scored_item(ranked, True, entities.get(rowi.id, ())).model_dump(mode="json", exclude_none=True)
        )
    return out


def _data(row: ActiveContextRow, policy: Policy, items: list[dict[str, Any]], offset: int, top_k: int,
          include_meta: bool) -> m.ActivateData:  # fmt: skip
    page = items[offset : offset + top_k]
    if not include_meta:
        page = [{"claim": i["claim"], "score": i["score"]} for i in page]
    more = offset + top_k < len(items)
    provenance = [p for i in page if (p := row.body["provenance"].get(i["claim"]["id"]))]
    return m.ActivateData(
        active_context_id=row.id,
        claims=[m.ScoredItem.model_validate(i) for i in page],
        claims_count=len(items),
        expires_at=row.expires_at,
        next_cursor=encode_cursor({"ac": row.id, "o": offset + top_k}) if more else None,
        has_more=more,
        policy_version=policy.version,
        provenance=provenance,
        scoring_params=_params(policy),
    )


async def activate(call: Call, args: m.ActivateInput) -> m.ActivateResult:
    if args.cursor is not None:
        body = decode_cursor(args.cursor)
        context_id, offset = body.get("ac"), body.get("o")
        if not isinstance(context_id, str) or not isinstance(offset, int) or offset < 0:
            raise invalid("cursor is not a next_cursor of activate")
        wanted: str = context_id
        now = call.runtime.now()

        def page(tx: Tx) -> m.ActivateData:
            row = _load(tx, call.principal, wanted, now)
            policy = current(tx)
            return _data(
                row, policy, _items(tx, call.principal, row, policy), offset, args.top_k, args.include_meta
            )

        data = await call.read(page)
        call.detail.update(active_context_id=context_id, offset=offset)
        return _result(call, data)
    check_tags(args.allow)
    as_of = call.runtime.now()
    ranked = await rank(call, args.q, args.scope, args.allow, as_of)
    kept = capped(ranked.policy, ranked.items)
    context_id = "ac_" + secrets.token_hex(12)
    created = parse_iso(as_of)
    expires = isoformat(created + timedelta(seconds=config(call).active_context_ttl_s))
    body = {
        "classes": sorted(ranked.allowed),
        "tags": list(ranked.tags),
        "claims": [
            {"id": scored_item(r, False).claim.id, "score": r.score, "scores": r.scores.model_dump()}
            for r in kept
        ],
        "provenance": {scored_item(r, False).claim.id: r.row.attrs.get("provenance", {}) for r in kept},
    }
    row = ActiveContextRow(context_id, call.principal.id, body, as_of, expires)
    purge = isoformat(created - PURGE_AFTER)

    def work(tx: Tx) -> m.ActivateData:
        tx.insert_active_context(row, purge)
        policy = current(tx)
        return _data(row, policy, _items(tx, call.principal, row, policy), 0, args.top_k, args.include_meta)

    call.detail.update(active_context_id=context_id, claims=len(kept))
    data = await call.transact(work)
    return _result(call, data.model_copy(update={"note": ranked.note}))


def _result(call: Call, data: m.ActivateData) -> m.ActivateResult:
    return m.ActivateResult(
        data=data, policy_version=data.policy_version, request_id=call.request_id, trace_id=call.trace_id
    )


async def read_resource(runtime: Runtime, caller: Principal, context_id: str) -> str:
    """`pce://active-context/{id}`: the whole AC as JSON (every claim, with its scores)."""
    now = runtime.now()

    def work() -> str:
        with runtime.store.transaction(write=False) as tx:
            row = _load(tx, caller, context_id, now)
            policy = current(tx)
            items = _items(tx, caller, row, policy)
        data = _data(row, policy, items, 0, max(len(items), 1), True)
        # a resource passes no tool output filter: mask secrets here as the pce filter does
        body = without_secrets(data.model_dump(mode="json", exclude_none=True))
        return json.dumps(body, ensure_ascii=False)

    return await runtime.in_thread(work)
