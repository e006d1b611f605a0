"""The rows a store hands out and the queries it answers: plain data, no behaviour."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memhub.core.models import ProjectRole


@dataclass(frozen=True, slots=True)
class ProjectRow:
    id: int
    name: str
    description: str | None
    attrs: dict[str, Any]
    owner: str
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class PrincipalRow:
    id: str
    kind: str
    role: str  # "admin" | "member"
    current_session_id: str | None
    created_at: str


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    principal: str
    name: str | None
    project_id: int | None
    status: str  # "active" | "ended"
    created_at: str
    ended_at: str | None


@dataclass(frozen=True, slots=True)
class LinkRow:
    id: int
    src: int
    dst: int
    type: str
    subtype: str | None
    strength: float
    created_at: str


@dataclass(frozen=True, slots=True)
class MemberRow:
    project_id: int
    principal: str
    role: ProjectRole
    created_at: str


@dataclass(frozen=True, slots=True)
class ItemRow:
    id: int
    kind: str
    project_id: int | None
    session_id: str | None
    parent_id: int | None
    owner: str
    scope: str
    boundary_class: str
    status: str
    title: str | None
    body: str
    tags: tuple[str, ...]
    attrs: dict[str, Any]
    content_hash: str | None
    importance: float
    quality: float
    access_count: int
    created_at: str
    updated_at: str
    expires_at: str | None
    category: str | None = None


@dataclass(frozen=True, slots=True)
class ItemBrief:
    """The columns a ranking reads, without the text: 200 of them cost ~0.8 ms, 200 ItemRows ~7."""

    id: int
    scope: str
    project_id: int | None
    session_id: str | None
    importance: float
    access_count: int
    created_at: str


@dataclass(slots=True)
class NewItem:
    kind: str
    owner: str
    scope: str
    body: str
    title: str | None = None
    project_id: int | None = None
    session_id: str | None = None
    parent_id: int | None = None
    boundary_class: str = "internal"
    status: str = "active"
    tags: Sequence[str] = ()
    attrs: dict[str, Any] = field(default_factory=dict)
    content_hash: str | None = None
    importance: float = 0.5
    expires_at: str | None = None
    category: str | None = None
    # None: the transaction's time. Set only by a restore of exported items (memory_manage import).
    created_at: str | None = None
    updated_at: str | None = None


# Columns `Tx.update_item` may change; text columns re-index the item.
UPDATABLE = frozenset(
    {"title", "body", "tags", "attrs", "importance", "category", "scope", "project_id", "session_id",
     "expires_at", "status", "quality", "content_hash"}
)  # fmt: skip
GROUPABLE = frozenset({"scope", "category", "kind", "project_id", "session_id", "owner"})


Order = Literal["id_asc", "id_desc", "importance_desc", "created_desc"]


@dataclass(slots=True)
class ItemQuery:
    """A filtered listing of visible items. Unset fields do not filter."""

    kinds: Sequence[str] = ()
    project_id: int | None = None
    parent_id: int | None = None
    top_level: bool = False  # only items without a parent
    min_id: int | None = None  # inclusive lower bound on id (paging)
    contains: Sequence[str] = ()  # normalised substrings; every one must occur in title or body
    with_child_kind: str | None = None  # only items having a child of this kind (decided topics)
    without_child_kind: str | None = None  # only items having no child of this kind
    scopes: Sequence[str] = ()
    session_id: str | None = None
    owner: str | None = None
    ids: Sequence[int] | None = None  # None: any id; an empty list matches nothing
    project_ids: Sequence[int] = ()
    tags_any: Sequence[str] = ()  # at least one of these tags
    tags_all: Sequence[str] = ()  # every one of these tags
    categories: Sequence[str] = ()
    importance_min: float | None = None
    importance_max: float | None = None
    created_from: str | None = None  # inclusive ISO timestamps
    created_to: str | None = None
    # Project rows only from these projects (rows of other scopes are not affected); None: any.
    scope_projects: Sequence[int] | None = None
    content_hash: str | None = None  # only items with this content hash
    order: Order = "id_asc"
    limit: int = 30


@dataclass(frozen=True, slots=True)
class EventRow:
    id: int
    at: str
    principal: str
    tool: str
    outcome: str
    detail: dict[str, Any]
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class VectorChange:
    seq: int
    item_id: int
    vec: bytes | None  # None: the vector was deleted


@dataclass(frozen=True, slots=True)
class PolicyRow:
    """One applied pce policy version (seed 000)."""

    version: str
    yaml: str
    doc: dict[str, Any]
    author: str
    approver: str | None
    signed: bool
    diff: list[str]
    applied_at: str


@dataclass(frozen=True, slots=True)
class ActiveContextRow:
    id: str
    owner: str
    body: dict[str, Any]
    created_at: str
    expires_at: str
