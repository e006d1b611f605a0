"""`pce.memory.upsert`: a claim is a row of the shared items table (kind `claim`).

Scopes map onto the store's scopes:
  session    store scope `session`: the caller's current session (one is started on first use)
  project    store scope `project`: the caller's current project (`--project`, git root name)
  principle  store scope `user`: the caller's own principle, across every project

Idempotency (§1.z): the content hash is sha256 of the text after NFC, CRLF/CR -> LF, each run
of spaces and tabs -> one space, and trimming. Upserting a text whose hash already names a
claim in the same place (same store scope, project or session, readable by the caller)
returns that claim's id. When that claim differs in kind or boundary class the answer is
DUPLICATE (409) with `existing_id`: the seed's "return the existing id or switch to an
update"; memhub never reclassifies a claim silently.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import timedelta

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import ErrorKind, MemhubError, invalid
from memhub.core.hashing import content_hash, sha256_hex
from memhub.core.ids import CLM, new_session_id
from memhub.core.models import Kind, Principal, Scope, Viewer
from memhub.policy.model import CLASSES, Policy
from memhub.policy.redact import classify, scan
from memhub.services import access
from memhub.services.pce import models as m
from memhub.services.pce.errors import BoundaryDenied, Duplicate, InvalidBoundary, InvalidScope, UnknownClaim
from memhub.services.pce.policies import current
from memhub.services.runtime import Call
from memhub.store.base import ItemQuery, ItemRow, NewItem, Tx

MENTIONS = "mentions"  # claim -> entity link
RELATION = "relation"  # entity -> entity link, subtype = the relation's type
STORE_SCOPES = {"session": Scope.SESSION.value, "project": Scope.PROJECT.value, "principle": Scope.USER.value}
PCE_SCOPES = {v: k for k, v in STORE_SCOPES.items()}
_HSPACE = re.compile(r"[^\S\n]+")


def normalize_text(text: str) -> str:
    """§1.z: NFC, CRLF (and lone CR) -> LF, runs of other whitespace -> one space, trimmed."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return _HSPACE.sub(" ", text).strip()


def claim_hash(text: str) -> str:
    return "sha256:" + sha256_hex(normalize_text(text))


def all_classes(tx: Tx, actor: Principal) -> Viewer:
    """The caller's eyes over every boundary class: for finding the caller's own writes."""
    return access.viewer(tx, actor, boundaries=CLASSES)


@dataclass(frozen=True)
class Place:
    scope: str  # the store's scope
    project_id: int | None
    session_id: str | None


def place(tx: Tx, actor: Principal, scope: str) -> Place:
    """Where a claim of `scope` written by `actor` goes (creating the session or project)."""
    tx.ensure_principal(actor.id)
    if scope == "project":
        try:
            project = access.current_project(tx, actor)
            access.project(tx, actor, project.id, access.Need.WRITE)
        except MemhubError as exc:
            if exc.kind is ErrorKind.FORBIDDEN:  # a viewer of the project
                raise BoundaryDenied(f"project scope: {exc.message}") from None
            if exc.kind not in (ErrorKind.INVALID, ErrorKind.NOT_FOUND):
                raise
            raise InvalidScope(f"project scope: {exc.message}") from None
        return Place(STORE_SCOPES["project"], project.id, None)
    if scope == "session":
        session = access.current_session(tx, actor)
        if session is None:
            session = tx.create_session(new_session_id(), actor.id, "pce", None)
            tx.set_current_session(actor.id, session.id)
        return Place(STORE_SCOPES["session"], None, session.id)
    return Place(STORE_SCOPES["principle"], None, None)


def _existing(
    tx: Tx, viewer: Viewer, where: Place, kind: str, key: str, owner: str | None = None
) -> ItemRow | None:
    rows = tx.query_items(
        viewer,
        ItemQuery(
            owner=owner,
            kinds=(kind,),
            content_hash=key,
            scopes=(where.scope,),
            project_id=where.project_id,
            session_id=where.session_id,
            limit=1,
        ),
    )
    return rows[0] if rows else None


def _strings(value: object) -> list[str]:
    """Every string inside a JSON-like value (provenance: actor, note, url, git fields)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _strings(item)]
    return []


def _check_boundary(text: str, declared: str) -> None:
    """INVALID_BOUNDARY when the text holds what its class does not cover (a secret in an
    internal claim, an e-mail address in a public one). Only the kinds found are named."""
    findings = scan(text)
    needed = classify(findings)
    order: dict[str, int] = {name: rank for rank, name in enumerate(CLASSES)}
    if needed != "internal" and order[needed] > order[declared]:
        kinds = sorted({f.kind for f in findings if f.category == needed})
        raise InvalidBoundary(
            f"the text contains {needed} data ({', '.join(kinds)}): upsert it as boundary_class {needed}"
            " or redact it first (pce.memory.boundary.validate)",
            needed=needed,
            found=kinds,
        )


def _expiry(tx: Tx, policy: Policy, scope: str) -> str | None:
    ttl = policy.doc.scope(scope).ttl_delta
    return None if ttl is None else isoformat(parse_iso(tx.now) + ttl)


def _entities(tx: Tx, call: Call, row: ItemRow, where: Place, args: m.UpsertInput) -> None:
    viewer = all_classes(tx, call.principal)
    known: dict[str, int] = {}
    for entity in args.entities or []:
        key = content_hash("pce-entity", where.scope, str(where.project_id), where.session_id, entity.id)
        found = _existing(tx, viewer, where, Kind.ENTITY, key)
        if found is None:
            found = tx.insert_item(
                NewItem(
                    kind=Kind.ENTITY,
                    owner=call.principal.id,
                    scope=where.scope,
                    project_id=where.project_id,
                    session_id=where.session_id,
                    title=entity.name,
                    body=entity.canonical_key or "",
                    boundary_class=row.boundary_class,
                    category=entity.type,
                    attrs={"entity_id": entity.id, "type": entity.type, "attrs": entity.attrs or {}},
                    content_hash=key,
                )
            )
        known[entity.id] = found.id
        tx.upsert_link(row.id, found.id, MENTIONS, entity.type, 1.0)
    for relation in args.relations or []:
        ends = []
        for end in (relation.src_id, relation.dst_id):
            if end not in known:
                key = content_hash("pce-entity", where.scope, str(where.project_id), where.session_id, end)
                found = _existing(tx, viewer, where, Kind.ENTITY, key)
                if found is None:
                    raise invalid(f"relations: entity {end[:60]!r} is neither in entities nor known here")
                known[end] = found.id
            ends.append(known[end])
        if relation.evidence_claim_id is not None:
            evidence = CLM.parse(relation.evidence_claim_id)
            if evidence is None or tx.get_item(viewer, evidence, (Kind.CLAIM,)) is None:
                raise UnknownClaim(
                    f"evidence claim {relation.evidence_claim_id[:40]} not found",
                )
        tx.upsert_link(ends[0], ends[1], RELATION, relation.type, 1.0)


async def upsert(call: Call, args: m.UpsertInput) -> m.UpsertResult:
    key = claim_hash(args.text)
    if args.content_hash is not None and args.content_hash != key:
        raise invalid("content_hash does not match the normalised text", expected=key)
    names = [f"{e.name} {e.canonical_key or ''}" for e in args.entities or []]
    # entities and provenance are returned with the claim: they share its class
    _check_boundary(
        "\n".join([args.text, *names, *_strings(args.provenance.model_dump())]), args.boundary_class
    )
    call.detail.update(boundary_class=args.boundary_class, scope=args.scope, kind=args.kind)

    def work(tx: Tx) -> tuple[str, str]:
        policy = current(tx)
        where = place(tx, call.principal, args.scope)
        # the caller's own claim in any class, else one the caller may read by default: another
        # member's pii/secret claim is never confirmed (not even as DUPLICATE)
        existing = _existing(
            tx, all_classes(tx, call.principal), where, Kind.CLAIM, key, owner=call.principal.id
        )
        existing = existing or _existing(tx, access.viewer(tx, call.principal), where, Kind.CLAIM, key)
        if existing is not None:
            same = existing.category == args.kind and existing.boundary_class == args.boundary_class
            if not same:
                raise Duplicate(
                    f"this text is already claim {CLM(existing.id)} with kind {existing.category} and"
                    f" boundary_class {existing.boundary_class}",
                    existing_id=CLM(existing.id),
                )
            call.detail.update(claim_id=CLM(existing.id), idempotent=True)
            return CLM(existing.id), policy.version
        row = tx.insert_item(
            NewItem(
                kind=Kind.CLAIM,
                owner=call.principal.id,
                scope=where.scope,
                project_id=where.project_id,
                session_id=where.session_id,
                body=args.text,
                boundary_class=args.boundary_class,
                category=args.kind,
                tags=(),
                attrs={
                    "pce_scope": args.scope,
                    "provenance": args.provenance.model_dump(mode="json", exclude_none=True),
                    "relations": [r.model_dump(mode="json", exclude_none=True) for r in args.relations or []],
                    "via": call.principal.via,
                },
                content_hash=key,
                expires_at=_expiry(tx, policy, args.scope),
            )
        )
        _entities(tx, call, row, where, args)
        call.detail.update(claim_id=CLM(row.id), idempotent=False, entities=len(args.entities or []))
        return CLM(row.id), policy.version

    claim_id, version = await call.transact(work)
    return m.UpsertResult(
        data=m.UpsertData(id=claim_id, policy_version=version),
        policy_version=version,
        request_id=call.request_id,
        trace_id=call.trace_id,
    )


def to_claim(row: ItemRow, text: str) -> m.Claim:
    return m.Claim(
        id=CLM(row.id),
        text=text,
        kind=row.category or "fact",  # type: ignore[arg-type]
        scope=row.attrs.get("pce_scope") or PCE_SCOPES.get(row.scope, "principle"),  # type: ignore[arg-type]
        boundary_class=row.boundary_class,  # type: ignore[arg-type]
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def age_days(now: str, created_at: str) -> float:
    return (parse_iso(now) - parse_iso(created_at)) / timedelta(days=1)
