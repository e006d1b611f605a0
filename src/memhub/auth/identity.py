"""Who is calling: the local user on stdio, an API-key holder over HTTP.

Over HTTP the key is checked by `ApiKeyMiddleware` (memhub.http) before the MCP layer sees the
request; it puts the resolved principal on the request's state, where `Identity` finds it.
Only a SHA-256 of each key is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

from memhub.core.errors import forbidden
from memhub.core.models import GlobalRole, Principal
from memhub.store.base import Store

STATE_KEY = "memhub_principal"
KEY_PREFIX = "mh_"


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_from_headers(headers: Mapping[str, str]) -> str | None:
    """`X-API-Key: <key>` or `Authorization: Bearer <key>`."""
    direct = headers.get("x-api-key")
    if direct:
        return direct.strip()
    scheme, _, value = (headers.get("authorization") or "").partition(" ")
    return value.strip() if hmac.compare_digest(scheme.lower(), "bearer") and value.strip() else None


def principal_for_key(store: Store, key: str, default_project: str | None) -> Principal | None:
    """The principal holding `key`, or None. Blocking: call from a worker thread."""
    with store.transaction(write=False) as tx:
        row = tx.principal_by_key(key_hash(key))
    if row is None:
        return None
    return Principal(id=row.id, role=GlobalRole(row.role), via="mcp", default_project=default_project)


class Identity:
    """Resolves a tool call's principal from its transport request (None on stdio)."""

    def __init__(self, local: Principal, *, require_key: bool) -> None:
        self.local = local
        self.require_key = require_key

    def __call__(self, request: Any) -> Principal:
        if request is None:
            return self.local
        principal = getattr(getattr(request, "state", None), STATE_KEY, None)
        if isinstance(principal, Principal):
            return principal
        if self.require_key:
            raise forbidden(
                "an API key is required (X-API-Key or Authorization: Bearer)", code="UNAUTHORIZED"
            )
        return self.local
