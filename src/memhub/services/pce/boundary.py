"""`pce.memory.boundary.validate`: boundary check and redact-before-send.

The payload's class is what its content needs (policy/redact.py): `secret` when it holds a
key, token or password, `pii` when it holds an e-mail address or a phone number, otherwise
`internal`. `allowed` says whether the caller's allow tags may send that class under the
policy in force (`secret`: never). `redacted` is always safe to send: secrets are masked
always, pii per the class's `redact` list when allowed and entirely when not.
"""

from __future__ import annotations

from memhub.policy.model import allowed_classes
from memhub.policy.redact import PII_KINDS, SECRET_KINDS, classify, redact, scan
from memhub.services.pce import models as m
from memhub.services.pce.policies import current
from memhub.services.pce.retrieval import check_tags
from memhub.services.runtime import Call


async def validate(call: Call, args: m.BoundaryInput) -> m.BoundaryResult:
    tags = check_tags(args.allow)
    policy = await call.read(current)
    findings = scan(args.payload)
    needed = classify(findings)
    allowed_set = allowed_classes(policy.doc, list(tags))
    allowed = needed in allowed_set
    rule = policy.doc.boundary(needed)
    pii = rule.redact if allowed else PII_KINDS
    safe, counts = redact(args.payload, [*SECRET_KINDS, *pii], findings)
    kinds = sorted({f.kind for f in findings})
    if allowed:
        reason = f"class {needed} is allowed for {', '.join(tags)}"
    elif needed == "secret":
        reason = f"the payload holds secrets ({', '.join(kinds)}): secret is never sent; send redacted"
    else:
        needs = ", ".join(rule.allow) or "nobody"
        reason = f"the payload holds {needed} ({', '.join(kinds)}); allow {', '.join(tags)}"
        reason += f" does not permit {needed}"
        reason += f" (allowed: {needs}); send redacted"
    if args.scope is not None:
        reason += f"; scope {args.scope}"
    call.detail["boundary"] = {
        "class": needed,
        "allowed": allowed,
        "allow": list(tags)[:10],
        "scope": args.scope,
        "found": kinds,
        "redacted": sum(counts.values()),
        "policy_version": policy.version,
    }
    return m.BoundaryResult(
        data=m.BoundaryData(allowed=allowed, reason=reason, redacted=safe, policy_version=policy.version),
        policy_version=policy.version,
        request_id=call.request_id,
        trace_id=call.trace_id,
    )
