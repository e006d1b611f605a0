"""What the decisions toolset reads from the process's settings: its state (`Toolset.state`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memhub.core.settings import Settings
from memhub.services.runtime import Call


@dataclass(frozen=True, slots=True)
class DecisionsConfig:
    proposals_dir: Path  # where proposals (markdown files) are written and read
    cooldown_s: float = 0.0  # between two decision writes of one principal
    review_window_s: float = 3600.0  # after it was written, before a proposal may be accepted
    agent_memory_secret: str = ""  # what accept_proposal requires over MCP (empty: off)

    @classmethod
    def from_settings(cls, settings: Settings) -> DecisionsConfig:
        return cls(
            proposals_dir=settings.proposals_dir,
            cooldown_s=settings.decision_cooldown_s,
            review_window_s=settings.review_window_s,
            agent_memory_secret=settings.agent_memory_secret,
        )


def config(call: Call) -> DecisionsConfig:
    return call.state_of(DecisionsConfig)
