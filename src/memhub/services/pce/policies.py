"""`pce.memory.policy.apply` and the policy in force.

The current policy is the latest applied version; with none applied the built-in default
policy (memhub.policy.model.DEFAULT_YAML) is in force, never "allow all". Applying needs the
global admin role. When the server has a policy HMAC key, every apply must carry `approver`
and `signature` = hex HMAC-SHA256(key, approver + "\\n" + the version in force + "\\n" + yaml);
anything else changes
nothing. `validate_only` checks the YAML alone; `dry_run` runs every check (role,
signature, expected_version) and stores nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from memhub.core.errors import Unauthorized, conflict, not_found
from memhub.core.models import Principal
from memhub.policy.model import DEFAULT_POLICY, Policy, PolicyDoc, diff, next_version, parse
from memhub.services import access
from memhub.services.pce import models as m
from memhub.services.pce.config import config
from memhub.services.runtime import Call, Runtime
from memhub.store.base import PolicyRow, Tx


def current(tx: Tx) -> Policy:
    row = tx.current_policy()
    if row is None:
        return DEFAULT_POLICY
    return Policy(row.version, PolicyDoc.model_validate(row.doc))


def sign(key: str, approver: str, yaml_text: str, base: str) -> str:
    """The signature a signed policy carries: it covers the version it replaces (`base`, the
    policy in force when it is applied), so a signed policy cannot be replayed later to roll a
    newer one back."""
    message = f"{approver}\n{base}\n{yaml_text}".encode()
    return hmac.new(key.encode(), message, hashlib.sha256).hexdigest()


def _verify(key: str, args: m.PolicyInput, base: str) -> bool:
    """True when the policy is signed with the server's key; raises when a key is configured
    and the signature is missing or wrong. Without a key nothing is verified."""
    if not key:
        return False
    if not args.approver or not args.signature:
        raise Unauthorized(
            "this server accepts signed policies only: pass approver and signature",
        )
    expected = sign(key, args.approver, args.yaml, base)
    if not hmac.compare_digest(expected, args.signature.strip().lower().removeprefix("hmac-sha256:")):
        raise Unauthorized("the policy signature does not verify")
    return True


async def apply(call: Call, args: m.PolicyInput) -> m.PolicyResult:
    doc = parse(args.yaml)  # INVALID_POLICY when it does not parse or validate
    key = config(call).policy_hmac_key

    def work(tx: Tx) -> tuple[str, str]:
        now = current(tx)
        history = tx.policy_versions()
        version = next_version(doc.version, history)
        call.detail.update(policy_version=version, validate_only=args.validate_only, dry_run=args.dry_run)
        if args.validate_only:
            return version, now.version
        if not access.is_admin(tx, call.principal):
            raise Unauthorized("only an admin may apply a policy")
        signed = _verify(key, args, now.version)
        if args.expected_version is not None and args.expected_version != now.version:
            raise conflict(
                f"the policy in force is {now.version}, not {args.expected_version}",
                reason="version_conflict",
                current_version=now.version,
                expected_version=args.expected_version,
            )
        changes = diff(now.doc, doc)
        call.detail.update(signed=signed, changes=len(changes))
        if args.dry_run:
            return version, now.version
        tx.insert_policy(
            PolicyRow(
                version=version,
                yaml=args.yaml,
                doc=doc.model_dump(mode="json"),
                author=call.principal.id,
                approver=args.approver,
                signed=signed,
                diff=changes,
                applied_at=tx.now,
            )
        )
        return version, version

    version, in_force = await call.transact(work)
    return m.PolicyResult(
        data=m.PolicyData(version=version),
        policy_version=in_force,
        request_id=call.request_id,
        trace_id=call.trace_id,
    )


async def version_in_force(runtime: Runtime) -> str:
    """The version a signature must name as its base (the built-in default's when none applied)."""

    def work() -> str:
        with runtime.store.transaction(write=False) as tx:
            return current(tx).version

    return await runtime.in_thread(work)


async def read_resource(runtime: Runtime, caller: Principal, version: str) -> str:
    """`pce://policy/{version}` (or `current`): a policy version with its history record."""

    def work() -> str:
        with runtime.store.transaction(write=False) as tx:
            row = tx.current_policy() if version == "current" else tx.get_policy(version)
        if row is None and version in ("current", DEFAULT_POLICY.version):
            doc = DEFAULT_POLICY.doc.model_dump(mode="json")
            return json.dumps({"version": DEFAULT_POLICY.version, "builtin": True, "doc": doc})
        if row is None:
            raise not_found(f"policy version {version[:40]} not found")
        body = {
            "version": row.version, "doc": row.doc, "yaml": row.yaml, "author": row.author,
            "approver": row.approver, "signed": row.signed, "diff": row.diff, "applied_at": row.applied_at,
        }  # fmt: skip
        return json.dumps(body, ensure_ascii=False)

    return await runtime.in_thread(work)
