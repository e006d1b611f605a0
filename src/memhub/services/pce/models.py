"""Inputs and results of the pce tools (seed 000 §2), with the seed's names, enums and limits."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from memhub.services.common import Envelope, Output, RequiredText, SafeText, StrictInput

Scope = Literal["session", "project", "principle"]
Kind = Literal["fact", "preference", "task", "policy_hint"]
BoundaryClass = Literal["public", "internal", "pii", "secret"]
Signal = Literal["helpful", "harmful", "outdated", "duplicate"]

_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\s]+$")


def _date_time(value: str) -> str:
    if not _DATE_TIME.match(value):
        raise ValueError("must be an RFC 3339 date-time such as 2025-01-31T12:00:00Z")
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError("must be a real date and time") from None
    return value


def _uri(value: str) -> str:
    if len(value) > 2000 or not _URI.match(value):
        raise ValueError("must be an absolute URI such as https://example.com/x")
    return value


def _at_most(limit: int) -> AfterValidator:
    """A length limit that is enforced but not published (tools/list stays lean)."""

    def check(value: Any) -> Any:
        if value is not None and len(value) > limit:
            raise ValueError(f"has more than {limit} {'characters' if isinstance(value, str) else 'items'}")
        return value

    return AfterValidator(check)


DateTime = Annotated[SafeText, AfterValidator(_date_time)]
Uri = Annotated[SafeText, AfterValidator(_uri)]
Tag = Annotated[RequiredText, _at_most(100)]
Short = Annotated[SafeText, Field(max_length=500)]


class Git(StrictInput):
    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{7,40}$")] | None = Field(
        None, description="Commit hash, 7-40 lowercase hex digits."
    )
    repo: Short | None = Field(None, description="Repository name or path.")
    url: Uri | None = Field(None, description="Link to the commit or repository.")
    files: list[Short] | None = Field(None, max_length=200, description="Files the claim comes from.")


class Provenance(StrictInput):
    at: DateTime = Field(description="When the claim was observed (RFC 3339 date-time).")
    actor: Short | None = Field(None, description="Who or what observed it.")
    git: Git | None = Field(None, description="Where in git it comes from.")
    url: Uri | None = Field(None, description="Source URL.")
    note: Annotated[SafeText, Field(max_length=2000)] | None = Field(None, description="Free note.")
    signed: bool | None = Field(None, description="Whether the source was signed.")


class Entity(StrictInput):
    id: Annotated[RequiredText, Field(max_length=200)] = Field(description="Your id of the entity.")
    type: Literal["Actor", "Artifact", "Event", "Concept"] = Field(description="Entity type.")
    name: Annotated[RequiredText, Field(max_length=500)] = Field(description="Display name.")
    canonical_key: Short | None = Field(None, description="Stable key (e.g. a path or e-mail hash).")
    attrs: dict[str, Any] | None = Field(None, description="Extra attributes.")


class Relation(StrictInput):
    id: Annotated[RequiredText, Field(max_length=200)] = Field(description="Your id of the relation.")
    src_id: Annotated[RequiredText, Field(max_length=200)] = Field(description="Source entity id.")
    dst_id: Annotated[RequiredText, Field(max_length=200)] = Field(description="Target entity id.")
    type: Annotated[RequiredText, Field(max_length=100)] = Field(description="Relation type.")
    props: dict[str, Any] | None = Field(None, description="Relation properties.")
    evidence_claim_id: Annotated[SafeText, Field(max_length=40)] | None = Field(
        None, description="Claim (clm_...) supporting it; default: this claim."
    )


_SCOPES = "session, project (current) or principle (yours, all projects)"
_ALLOW = "Purpose tags, e.g. tool:contact-lookup (default answer:task)."


class RetrievalInput(StrictInput):
    scope: Annotated[list[Scope], _at_most(3)] | None = Field(None, description=f"Scopes: {_SCOPES}.")
    allow: Annotated[list[Tag], _at_most(20)] | None = Field(None, description=_ALLOW)
    top_k: int = Field(10, ge=1, le=50, description="Claims per page.")
    cursor: Annotated[SafeText, _at_most(16_000)] | None = Field(None, description="next_cursor of a page.")
    include_meta: bool = Field(False, description="Add score breakdown.")


class ActivateInput(RetrievalInput):
    q: Annotated[RequiredText, _at_most(4000)] = Field(description="The task.")


class SearchInput(RetrievalInput):
    query: Annotated[RequiredText, _at_most(4000)] = Field(description="What to recall.")


# Nested inputs are published by their description (the server validates them in full): the
# seed's definitions spelled out as JSON Schema tripled tools/list for this one tool.
_ENTITIES = {
    "type": "array",
    "items": {"type": "object"},
    "description": "Entities: {id, type: Actor|Artifact|Event|Concept, name, canonical_key?, attrs?}.",
}
_RELATIONS = {
    "type": "array",
    "items": {"type": "object"},
    "description": "Relations: {id, src_id, dst_id (entity ids), type, props?, evidence_claim_id?}.",
}
_PROVENANCE = {
    "type": "object",
    "required": ["at"],
    "description": "Source: {at: RFC 3339 time, actor?, git?: {commit, repo?, url?, files?}, url?, note?}.",
}


class UpsertInput(StrictInput):
    text: Annotated[RequiredText, _at_most(16_000)] = Field(description="The claim.")
    kind: Kind = Field("fact", description="What sort of claim.")
    scope: Scope = Field("project", description=f"Where it holds: {_SCOPES}.")
    boundary_class: BoundaryClass = Field("internal", description="Sensitivity.")
    entities: Annotated[list[Entity] | None, _at_most(50), WithJsonSchema(_ENTITIES)] = None
    relations: Annotated[list[Relation] | None, _at_most(100), WithJsonSchema(_RELATIONS)] = None
    provenance: Annotated[Provenance, WithJsonSchema(_PROVENANCE)]
    content_hash: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = Field(
        None, description="sha256 of the normalised text."
    )


class FeedbackInput(StrictInput):
    claim_id: Annotated[SafeText, _at_most(40)] = Field(description="Claim id (clm_...).")
    signal: Signal = Field(description="How the claim fared.")
    score: float | None = Field(None, ge=-1.0, le=1.0, description="Strength in [-1, 1].")


class BoundaryInput(StrictInput):
    payload: Annotated[SafeText, _at_most(32_000)] = Field(description="Text about to be sent.")
    allow: Annotated[list[Tag], _at_most(20)] | None = Field(None, description=_ALLOW)
    scope: Scope | None = Field(None, description="Scope the payload is for.")


class PolicyInput(StrictInput):
    yaml: Annotated[RequiredText, _at_most(120_000)] = Field(description="Policy YAML.")
    dry_run: bool = Field(False, description="Check all, store nothing.")
    validate_only: bool = Field(False, description="Check the YAML only, store nothing.")
    expected_version: Annotated[SafeText, _at_most(40)] | None = Field(
        None, description="Apply only over this version."
    )
    signature: Annotated[SafeText, _at_most(200)] | None = Field(None, description="HMAC-SHA256 hex.")
    approver: Annotated[SafeText, _at_most(200)] | None = Field(None, description="Who approved.")


# -- results ----------------------------------------------------------------------------------


class Claim(Output):
    id: str
    text: str
    kind: Kind
    scope: Scope
    boundary_class: BoundaryClass
    created_at: str
    updated_at: str


class Scoring(Output):
    text: float
    vector: float
    combined: float
    quality: float
    recency: float
    g: float


class Evidence(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)
    id: str | None = None
    source_type: str | None = None
    source_id: str | None = None
    snippet: str | None = None
    at: str | None = None
    via: str | None = None  # entity evidence: the link type or relation that reached it
    depth: int | None = None  # entity evidence: hops from the claim


class ScoredItem(Output):
    claim: Claim
    score: float
    scores: Scoring | None = None
    evidences: list[Evidence] | None = None
    reason: str | None = None


class RerankParams(Output):
    use_quality: bool
    recency_half_life_days: float


class ScoringParams(Output):
    alpha: float
    k_txt: int
    k_vec: int
    k_final: int
    rerank: RerankParams


class ActivateData(Output):
    active_context_id: str
    claims: list[ScoredItem]
    claims_count: int
    expires_at: str
    next_cursor: str | None = None
    has_more: bool
    policy_version: str
    provenance: list[dict[str, Any]]
    scoring_params: ScoringParams
    note: str | None = Field(
        default=None, description="What the ranking may have missed (model loading, claims not embedded yet)."
    )


class SearchData(Output):
    items: list[ScoredItem]
    next_cursor: str | None = None
    has_more: bool
    policy_version: str
    note: str | None = Field(
        default=None, description="What the ranking may have missed (model loading, claims not embedded yet)."
    )


class UpsertData(Output):
    id: str
    policy_version: str


class FeedbackData(Output):
    ok: bool
    policy_version: str


class BoundaryData(Output):
    allowed: bool
    reason: str | None = None
    redacted: str
    policy_version: str


class PolicyData(Output):
    version: str


class _Result(Envelope):
    policy_version: str
    request_id: str
    trace_id: str


class ActivateResult(_Result):
    data: ActivateData = Field(description="Claims (claim, score) and paging.")


class SearchResult(_Result):
    data: SearchData = Field(description="items (claim, score), paging.")


class UpsertResult(_Result):
    data: UpsertData = Field(description="id.")


class FeedbackResult(_Result):
    data: FeedbackData = Field(description="ok.")


class BoundaryResult(_Result):
    data: BoundaryData = Field(description="allowed, reason, redacted.")


class PolicyResult(_Result):
    data: PolicyData = Field(description="version.")
