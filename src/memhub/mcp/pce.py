"""The `pce` toolset (seed 000): claims with provenance, boundary-first retrieval, policies."""

from __future__ import annotations

from typing import Any

from memhub.mcp.toolkit import ResourceSpec, Toolset, ToolSpec
from memhub.policy.redact import redact_secrets
from memhub.services.pce import boundary, claims, contexts, errors, feedback, policies, retrieval
from memhub.services.pce import models as m
from memhub.services.pce.config import PceConfig
from memhub.services.runtime import Call, Runtime

KB = 1024


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def no_secrets(call: Call, body: dict[str, Any]) -> dict[str, Any]:
    """Redact-before-send for every pce result: no key, token or password leaves, whatever
    class the claim carrying it was given."""
    return dict(_scrub(body))


async def policy_version(runtime: Runtime) -> str:
    def read() -> str:
        with runtime.store.transaction(write=False) as tx:
            return policies.current(tx).version

    return await runtime.in_thread(read)


TOOLS = (  # a tuple: each spec keeps its own ToolSpec[In, Out] type for the checker
    ToolSpec(
        "pce.memory.activate",
        "Build an active context: the claims that matter for a task, ranked and boundary-checked "
        "(also resource pce://active-context/{id}).",
        m.ActivateInput,
        m.ActivateResult,
        contexts.activate,
        read_only=False,
        title="Activate context",
        exclude_none=True,
        max_payload=16 * KB,
        timeout_s=15.0,
    ),
    ToolSpec(
        "pce.memory.search",
        "Recall known facts, conventions and prohibitions (claims), best first.",
        m.SearchInput,
        m.SearchResult,
        retrieval.search,
        read_only=True,
        title="Search claims",
        exclude_none=True,
        max_payload=32 * KB,
        timeout_s=10.0,
    ),
    ToolSpec(
        "pce.memory.upsert",
        "Record a claim with its provenance; the same text again returns the same id.",
        m.UpsertInput,
        m.UpsertResult,
        claims.upsert,
        read_only=False,
        idempotent=True,
        title="Upsert claim",
        exclude_none=True,
        max_payload=64 * KB,
        timeout_s=10.0,
    ),
    ToolSpec(
        "pce.memory.feedback",
        "Tell whether a claim helped; this changes its ranking.",
        m.FeedbackInput,
        m.FeedbackResult,
        feedback.feedback,
        read_only=False,
        idempotent=True,
        title="Claim feedback",
        exclude_none=True,
        max_payload=4 * KB,
        timeout_s=3.0,
    ),
    ToolSpec(
        "pce.memory.boundary.validate",
        "Before sending text out: is it allowed, and its redacted (safe) form.",
        m.BoundaryInput,
        m.BoundaryResult,
        boundary.validate,
        read_only=True,
        title="Validate boundary",
        exclude_none=True,
        max_payload=32 * KB,
        timeout_s=5.0,
    ),
    ToolSpec(
        "pce.memory.policy.apply",
        "Apply a versioned policy (YAML: scopes, boundary_classes, retrieval); admins only.",
        m.PolicyInput,
        m.PolicyResult,
        policies.apply,
        read_only=False,
        title="Apply policy",
        exclude_none=True,
        max_payload=128 * KB,
        timeout_s=10.0,
        rate_class="admin",
    ),
)

TOOLSET = Toolset(
    "pce",
    errors.render,
    TOOLS,
    instructions=(
        "Claims with provenance for coding agents: activate before a task, boundary.validate before "
        "sending text out, upsert decisions after, feedback when a claim helped or misled. pii and "
        "secret claims are guarded by the policy's boundary classes."
    ),
    output_filter=no_secrets,
    resources=[
        ResourceSpec(
            "pce://active-context/{id}",
            "active-context",
            "An active context of pce.memory.activate (its claims and scores) until it expires.",
            contexts.read_resource,
        ),
        ResourceSpec(
            "pce://policy/{id}",
            "policy",
            "A policy version (or `current`): its YAML, author, approver, signature check, diff, time.",
            policies.read_resource,
        ),
    ],
    policy_version=policy_version,
    state=PceConfig.from_settings,
)
