"""What only an admin does in the dashboard: people and their API keys, project members, the
audit log and its chain, the pce policy versions. Every function checks the admin role of
record (`access.is_admin`, read from the store), whatever the page already checked."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memhub.audit.chain import ChainReport, verify_chain
from memhub.auth.identity import ensure_key_holder, key_hash, new_key
from memhub.core.errors import forbidden, invalid, not_found
from memhub.services import access
from memhub.services.runtime import Call, Runtime
from memhub.store.base import EventRow, MemberRow, PolicyRow, PrincipalRow, ProjectRow, Tx

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")
AUDIT_PAGE = 50
AUDIT_SCAN = 5_000  # events one page reads at most (a rare filter continues on the next)
MAX_PROJECTS = 500


def _admin(tx: Tx, call: Call) -> None:
    if not access.is_admin(tx, call.principal):
        raise forbidden("this page is for admins")


@dataclass(frozen=True)
class Person:
    row: PrincipalRow
    has_key: bool


def people(tx: Tx, call: Call) -> list[Person]:
    _admin(tx, call)
    return [Person(row, tx.has_api_key(row.id)) for row in tx.list_principals()]


def create_key(tx: Tx, call: Call, name: str, admin: bool) -> str:
    """A new API key for `name` (created if new), shown once; only its SHA-256 is kept.
    An existing key of `name` is replaced (as `memhub apikey create` does)."""
    _admin(tx, call)
    if not NAME.match(name):
        raise invalid("a user name is 1-100 letters, digits, '.', '_', '@' or '-'")
    ensure_key_holder(tx, name)
    key = new_key()
    tx.set_api_key(name, key_hash(key), "admin" if admin else None)
    call.detail.update(user=name, admin=admin)
    return key


def revoke_key(tx: Tx, call: Call, name: str) -> None:
    _admin(tx, call)
    if tx.get_principal(name) is None:
        raise not_found(f"user {name!r} not found")
    tx.set_api_key(name, None)
    call.detail.update(user=name)


def members(tx: Tx, call: Call) -> list[tuple[ProjectRow, list[MemberRow]]]:
    """Every project with its members and roles (an admin manages every project)."""
    _admin(tx, call)
    out = []
    for row in tx.list_principals():
        for project, _role in tx.list_memberships(row.id, (), MAX_PROJECTS):
            out.append(project)
    unique = {p.id: p for p in out}
    return [(p, tx.list_members(p.id)) for p in sorted(unique.values(), key=lambda p: p.name)]


def policies(tx: Tx, call: Call) -> list[PolicyRow]:
    """Every applied pce policy version, newest first (each with its diff to the one before)."""
    _admin(tx, call)
    rows = [tx.get_policy(v) for v in tx.policy_versions()]
    return [r for r in reversed(rows) if r is not None]


@dataclass(frozen=True)
class AuditPage:
    events: list[EventRow]  # newest first
    next_before: int | None


def audit(
    runtime: Runtime, call: Call, *, who: str, tool: str, outcome: str, before: int | None
) -> AuditPage:
    """The newest `AUDIT_PAGE` events matching the filters (exact principal and outcome, tool
    prefix) older than `before`, by keyset on the log's id: a page reads at most `AUDIT_SCAN`
    events however long the log is (blocking)."""
    with runtime.store.transaction(write=False) as tx:
        _admin(tx, call)
        events, next_before = tx.events_page(
            before=before, limit=AUDIT_PAGE, scan=AUDIT_SCAN, principal=who, tool_prefix=tool, outcome=outcome
        )
    return AuditPage(events, next_before)


def verify(runtime: Runtime, call: Call) -> ChainReport:
    """The whole chain checked from its genesis (blocking)."""
    with runtime.store.transaction(write=False) as tx:
        _admin(tx, call)
    return verify_chain(runtime.store.iter_events())
