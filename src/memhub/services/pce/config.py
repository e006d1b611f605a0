"""What the pce toolset reads from the process's settings: its state (`Toolset.state`)."""

from __future__ import annotations

from dataclasses import dataclass

from memhub.core.settings import Settings
from memhub.services.runtime import Call


@dataclass(frozen=True, slots=True)
class PceConfig:
    active_context_ttl_s: float = 1800.0  # how long an active context stays readable
    policy_hmac_key: str = ""  # set: a policy needs an approver and this key's signature
    require_policy: bool = False  # activate/search answer POLICY_MISSING until a policy is applied
    feedback_bucket_s: int = 3600  # one feedback signal per claim and caller per bucket

    @classmethod
    def from_settings(cls, settings: Settings) -> PceConfig:
        return cls(
            active_context_ttl_s=settings.pce_active_context_ttl_s,
            policy_hmac_key=settings.pce_policy_hmac_key,
            require_policy=settings.pce_require_policy,
            feedback_bucket_s=settings.pce_feedback_bucket_s,
        )


def config(call: Call) -> PceConfig:
    return call.state_of(PceConfig)
