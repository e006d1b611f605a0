"""Identity resolvers: map a request's transport metadata to a Principal."""

from __future__ import annotations

from collections.abc import Mapping

from memhub.core.models import Principal


class LocalIdentity:
    """Every call is the configured local user (stdio, and HTTP bound to loopback)."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    def __call__(self, headers: Mapping[str, str] | None) -> Principal:
        return self.principal
