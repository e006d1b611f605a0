"""`pce.memory.feedback`: helpful / harmful / outdated / duplicate signals update a claim's quality.

Idempotent per (claim, caller, time bucket): the first signal in a bucket counts, a repeat
(a retry, a double click) is acknowledged and changes nothing. The bucket is
`floor(unix time / MEMHUB_PCE_FEEDBACK_BUCKET_S)` (default one hour). The quality rule is
`ranking.update_quality` (docs/ranking.md).

Feedback changes a claim's ranking for everyone who reads it, so it is a write: the caller
must be allowed to change the claim (`access.may_modify`: its author, or an owner or editor
of its project). A project viewer may read a claim but not rate it (BOUNDARY_DENIED, 403).
"""

from __future__ import annotations

from memhub.core.clock import parse_iso
from memhub.core.ids import CLM
from memhub.core.models import Kind
from memhub.services import access
from memhub.services.pce import models as m
from memhub.services.pce import ranking
from memhub.services.pce.config import config
from memhub.services.pce.errors import BoundaryDenied, UnknownClaim
from memhub.services.pce.policies import current
from memhub.services.pce.retrieval import boundary_viewer
from memhub.services.runtime import Call
from memhub.store.base import Tx


async def feedback(call: Call, args: m.FeedbackInput) -> m.FeedbackResult:
    item_id = CLM.parse(args.claim_id)
    bucket_s = max(1, config(call).feedback_bucket_s)
    call.detail.update(claim_id=args.claim_id[:40], signal=args.signal)

    def work(tx: Tx) -> str:
        policy = current(tx)
        # the claims a caller may rate are those it may read (pii included; never secret)
        viewer = boundary_viewer(tx, call, frozenset({"public", "internal", "pii"}))
        row = tx.get_item(viewer, item_id, (Kind.CLAIM,)) if item_id is not None else None
        if row is None:
            raise UnknownClaim(f"claim {args.claim_id[:40]} not found")
        if not access.may_modify(tx, call.principal, row):
            raise BoundaryDenied(
                f"feedback on claim {args.claim_id[:40]} needs write access: a viewer of its project"
                " may read it but not rate it",
            )
        bucket = int(parse_iso(call.at).timestamp() // bucket_s)  # the call's time (injectable clock)
        fresh = tx.add_feedback(row.id, call.principal.id, bucket, args.signal, args.score)
        if fresh:
            quality = ranking.update_quality(row.quality, args.signal, args.score)
            tx.update_item(row.id, {"quality": quality})
        call.detail.update(applied=fresh, ts_bucket=bucket)
        return policy.version

    version = await call.transact(work)
    return m.FeedbackResult(
        data=m.FeedbackData(ok=True, policy_version=version),
        policy_version=version,
        request_id=call.request_id,
        trace_id=call.trace_id,
    )
