"""Who is calling: the local user on stdio, an API-key or JWT holder over HTTP.

Over HTTP the credential is checked by the guard middleware (memhub.http.guard) before the
MCP layer sees the request (`Authenticator`); it puts the resolved principal on the request's
state, where `Identity` finds it. Only a SHA-256 of each API key is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any

from memhub.auth.tokens import JwtVerifier, looks_like_jwt
from memhub.core.errors import Unauthorized, invalid
from memhub.core.models import GlobalRole, Principal
from memhub.store.base import Store, Tx

STATE_KEY = "memhub_principal"
# The kind of the principals JWT subjects name. The schema knows two kinds, `user` (local
# users, API-key holders: made on this server) and `agent`; principals from an identity
# provider are `agent`s, so a token can never name a `user`.
JWT_KIND = "agent"
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


class Authenticator:
    """Credentials -> principal: `X-API-Key`, or `Authorization: Bearer` with an API key or a JWT.

    `modes` says what is accepted ("apikey", "jwt" or both). JWT subjects live in their own
    namespace: a JWT's principal is created in the store the first time it is seen, of kind
    `agent` (`JWT_KIND`; role `member`; `memhub apikey create NAME --admin` or the store decide its role), and
    a token is refused when its subject names a principal of another kind (the server's OS
    user, an API-key holder, a stdio user) or the server's local user: whoever controls the
    identity provider's names does not become a local account. Blocking: call from a worker
    thread."""

    def __init__(
        self,
        store: Store,
        default_project: str | None,
        *,
        api_keys: bool = True,
        verifier: JwtVerifier | None = None,
        local_user: str = "",
    ) -> None:
        self.store = store
        self.local_user = local_user
        self.default_project = default_project
        self.api_keys = api_keys
        self.verifier = verifier

    def __call__(self, headers: Mapping[str, str]) -> tuple[Principal | None, str]:
        """(principal, "") or (None, why it was refused). Never echoes the credential."""
        credential = key_from_headers(headers)
        if credential is None:
            return None, "credentials required (X-API-Key or Authorization: Bearer)"
        if self.verifier is not None and looks_like_jwt(credential):
            check = self.verifier.verify(credential)
            if check.subject is None:
                return None, check.reason
            principal = self._jwt_principal(check.subject)
            if principal is None:
                return None, "token subject names a local principal, not a JWT user"
            return principal, ""
        if not self.api_keys:
            return None, "a JWT bearer token is required"
        found = principal_for_key(self.store, credential, self.default_project)
        return (found, "") if found is not None else (None, "unknown API key")

    def _jwt_principal(self, name: str) -> Principal | None:
        if name == self.local_user:
            return None
        with self.store.transaction(write=False) as tx:
            row = tx.get_principal(name)
        if row is None:
            with self.store.transaction(write=True) as tx:
                row = tx.ensure_principal(name, kind=JWT_KIND)
        if row.kind != JWT_KIND:
            return None
        return Principal(
            id=row.id, role=GlobalRole(row.role), via="mcp", default_project=self.default_project
        )


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
            raise Unauthorized("an API key is required (X-API-Key or Authorization: Bearer)")
        return self.local


def ensure_key_holder(tx: Tx, name: str) -> None:
    """The principal an API key is made for: a user, created if new. A name a JWT subject
    already holds is refused: the key and the token would share one account."""
    row = tx.ensure_principal(name)
    if row.kind == JWT_KIND:
        raise invalid(f"{name!r} is an identity provider's subject (JWT): choose another user name")
