"""The `decisions` toolset (seed 002): record, supersede and search decisions, accept proposals."""

from __future__ import annotations

from memhub.mcp.toolkit import Toolset, ToolSpec
from memhub.services.decisions import errors, proposals, service
from memhub.services.decisions import models as m
from memhub.services.decisions.config import DecisionsConfig
from memhub.services.runtime import Call

WRITE_PAYLOAD = 256 * 1024


async def _accept(call: Call, args: m.AcceptInput) -> m.BaseResponse:
    return await proposals.accept(call, args.proposal_id, args.secret)


TOOLS = (  # a tuple: each spec keeps its own ToolSpec[In, Out] type for the checker
    ToolSpec(
        "record_decision",
        "Record a decision (marked [via MCP]) in the current project. Its text never changes.",
        m.RecordInput,
        m.DecisionResponse,
        service.record,
        read_only=False,
        title="Record decision",
        max_payload=WRITE_PAYLOAD,
    ),
    ToolSpec(
        "supersede_decision",
        "Replace decisions with a new one (old ids: dec_N). Decisions a person recorded cannot be "
        "superseded by an agent.",
        m.SupersedeInput,
        m.DecisionResponse,
        service.supersede,
        read_only=False,
        title="Supersede decisions",
        max_payload=WRITE_PAYLOAD,
    ),
    ToolSpec(
        "search_decisions",
        "Search decisions by meaning and words; current decisions rank first, one per target.",
        m.SearchInput,
        m.SearchResponse,
        service.search,
        read_only=True,
        title="Search decisions",
        exclude_none=True,
        max_payload=16 * 1024,
    ),
    ToolSpec(
        "accept_proposal",
        "Accept a reviewed proposal as an active decision (ADMIN role and secret; not during its "
        "1-hour review window).",
        m.AcceptInput,
        m.BaseResponse,
        _accept,
        read_only=False,
        title="Accept proposal",
        rate_class="admin",
        max_payload=4 * 1024,
    ),
)

TOOLSET = Toolset(
    "decisions",
    errors.render,
    TOOLS,
    instructions=(
        "Decision records with supersede chains. Search before deciding; supersede an outdated "
        "decision rather than recording a contradicting one. strict search returns only current "
        "decisions. Your decisions carry [via MCP]; people's decisions outrank them."
    ),
    state=DecisionsConfig.from_settings,
)
