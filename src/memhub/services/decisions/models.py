"""Seed 002's tool inputs and responses: property names, types, limits and defaults as the seed
gives them; `secret` on accept_proposal is the one optional property memhub adds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from memhub.services.common import Envelope, Output, RequiredText, SafeText, StrictInput

TITLE_CHARS = 500
TARGET_CHARS = 200
TEXT_CHARS = 16_000
CONSEQUENCE_CHARS = 2_000
MAX_CONSEQUENCES = 20
MAX_OLD = 20
QUERY_CHARS = 2_000
MAX_LIMIT = 20
PREVIEW_CHARS = 200

Mode = Literal["strict", "balanced", "audit"]
DecisionId = Annotated[str, Field(pattern=r"^(dec_)?[0-9]{1,18}$", description="dec_42 (or 42).")]
Consequences = Annotated[
    list[Annotated[SafeText, Field(max_length=CONSEQUENCE_CHARS)]],
    Field(max_length=MAX_CONSEQUENCES, description="Expected effects, one per item."),
]


def _rationale(minimum: int) -> object:
    # the minimum is checked (after stripping) by the models' validators; published for clients
    return Field(
        max_length=TEXT_CHARS,
        description=f"Why (at least {minimum} chars).",
        json_schema_extra={"minLength": minimum},
    )


class _DecisionInput(StrictInput):
    title: Annotated[RequiredText, Field(min_length=1, max_length=TITLE_CHARS, description="Short title.")]
    target: Annotated[
        RequiredText,
        Field(min_length=1, max_length=TARGET_CHARS, description="What it applies to, e.g. database_policy."),
    ]
    consequences: Consequences = Field(default_factory=list)

    @field_validator("title", "target")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


class RecordInput(_DecisionInput):
    rationale: Annotated[SafeText, _rationale(10)]

    @field_validator("rationale")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if len(value.strip()) < 10:
            raise ValueError("must be at least 10 characters (not counting surrounding spaces)")
        return value.strip()


class SupersedeInput(_DecisionInput):
    rationale: Annotated[SafeText, _rationale(15)]
    old_decision_ids: Annotated[
        list[DecisionId],
        Field(min_length=1, max_length=MAX_OLD, description="Decisions it replaces (dec_42 or 42)."),
    ]

    @field_validator("rationale")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if len(value.strip()) < 15:
            raise ValueError("must be at least 15 characters (not counting surrounding spaces)")
        return value.strip()


class SearchInput(StrictInput):
    query: Annotated[RequiredText, Field(min_length=1, max_length=QUERY_CHARS, description="What to find.")]
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Maximum results.")] = 5
    mode: Annotated[
        Mode,
        Field(description="strict: active only; balanced: status-aware, one per target; audit: all."),
    ] = "balanced"


class AcceptInput(StrictInput):
    proposal_id: Annotated[
        RequiredText, Field(max_length=255, description="The filename of the proposal (no path).")
    ]
    secret: Annotated[
        SafeText | None,
        Field(max_length=1_000, description="The server's AGENT_MEMORY_SECRET (required over MCP)."),
    ] = None


# -- responses ------------------------------------------------------------------------------


class BaseResponse(Envelope):
    status: Literal["success", "error"] = "success"
    message: str | None = None


class DecisionView(Output):
    id: str
    title: str
    target: str
    status: str
    supersedes: list[str]
    consequences: list[str]
    via: str  # "mcp": an agent (shown with [via MCP]); "cli": a person
    project: str
    created_at: str


class DecisionResponse(BaseResponse):
    decision: DecisionView


class SearchHit(Output):
    id: str
    score: float
    status: str
    preview: str
    kind: str
    target: str
    chain: list[str] | None = None  # audit mode: the supersede chain, oldest first


class SearchResponse(BaseResponse):
    results: list[SearchHit]
    note: str | None = None
