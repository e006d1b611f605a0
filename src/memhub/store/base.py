"""The storage contract: row types and the `Store` / `Tx` protocols every backend implements.

A `Tx` is one transaction; a tool call does all its writes through one `Tx`, so a failed
call changes nothing. Every read of items goes through the viewer-scoped methods, which
apply the single visibility filter (scope, project membership, owner, expiry, boundary).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from memhub.core.models import ProjectRole, Viewer


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
    # Per-scope restrictions: project rows only from these projects; session rows only from this
    # session (set `restrict_sessions` with `session_of_scope` None to exclude session rows).
    scope_projects: Sequence[int] | None = None
    restrict_sessions: bool = False
    session_of_scope: str | None = None
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


class Tx(Protocol):
    """One transaction. Methods raise MemhubError(STORAGE) on database failure."""

    now: str

    # projects and membership
    def insert_project(
        self, name: str, description: str | None, attrs: dict[str, Any], owner: str
    ) -> ProjectRow: ...
    def get_project(self, project_id: int) -> ProjectRow | None: ...
    def get_project_by_name(self, name: str) -> ProjectRow | None: ...
    def list_projects(self, principal: str, limit: int) -> list[ProjectRow]: ...
    def set_member(self, project_id: int, principal: str, role: ProjectRole) -> None: ...
    def member_role(self, project_id: int, principal: str) -> ProjectRole | None: ...
    def update_project(self, project_id: int, name: str | None, description: str | None) -> ProjectRow: ...
    def delete_project(self, project_id: int) -> None: ...
    def list_members(self, project_id: int) -> list[MemberRow]: ...
    def remove_member(self, project_id: int, principal: str) -> bool: ...
    def list_memberships(
        self, principal: str, roles: Sequence[ProjectRole], limit: int
    ) -> list[tuple[ProjectRow, ProjectRole]]: ...

    # principals and sessions
    def ensure_principal(self, principal: str, kind: str = "user") -> PrincipalRow: ...
    def get_principal(self, principal: str) -> PrincipalRow | None: ...
    def set_current_session(self, principal: str, session_id: str | None) -> None: ...
    def set_api_key(self, principal: str, key_hash: str | None, role: str | None = None) -> None: ...
    def principal_by_key(self, key_hash: str) -> PrincipalRow | None: ...
    def list_principals(self) -> list[PrincipalRow]: ...
    def has_api_key(self, principal: str) -> bool: ...
    def create_session(
        self, session_id: str, principal: str, name: str | None, project_id: int | None
    ) -> SessionRow: ...
    def get_session(self, session_id: str) -> SessionRow | None: ...
    def list_sessions(self, principal: str, limit: int) -> list[SessionRow]: ...
    def end_session(self, session_id: str) -> SessionRow: ...

    # items
    def insert_item(self, item: NewItem) -> ItemRow: ...
    def get_item(self, viewer: Viewer, item_id: int, kinds: Sequence[str] = ()) -> ItemRow | None: ...
    def query_items(self, viewer: Viewer, query: ItemQuery) -> list[ItemRow]: ...
    def norm_texts(self, ids: Sequence[int]) -> dict[int, str]:
        """Item id -> its normalised title and body (callers pass ids the viewer may read)."""
        ...

    def query_briefs(self, viewer: Viewer, query: ItemQuery) -> list[ItemBrief]:
        """`query_items` reading only ItemBrief's columns (order not guaranteed)."""
        ...

    def subtree(self, viewer: Viewer, root_id: int, kind: str, limit: int) -> list[ItemRow]: ...
    def text_search(
        self,
        viewer: Viewer,
        match: str | Sequence[str],
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
        budget: int = ...,
    ) -> list[tuple[int, float]]: ...

    def visible_ids(
        self, viewer: Viewer, ids: Sequence[int], kinds: Sequence[str], project_id: int | None
    ) -> set[int]: ...

    def update_item(self, item_id: int, changes: dict[str, Any]) -> ItemRow: ...
    def delete_items(self, ids: Sequence[int]) -> int: ...
    def touch_access(self, ids: Sequence[int]) -> None: ...
    def count_items(self, viewer: Viewer, query: ItemQuery, cap: int | None = None) -> int: ...
    def group_counts(self, viewer: Viewer, query: ItemQuery, column: str) -> dict[str, int]: ...
    def tag_counts(self, viewer: Viewer, query: ItemQuery, limit: int) -> dict[str, int]: ...

    # links
    def upsert_link(self, src: int, dst: int, type: str, subtype: str | None, strength: float) -> None: ...
    def links_of(self, ids: Sequence[int], types: Sequence[str]) -> list[LinkRow]: ...

    # vectors
    def get_vector(self, item_id: int, embedder: str) -> bytes | None: ...
    def missing_vectors(
        self, embedder: str, limit: int, after_id: int = 0, ids: Sequence[int] = ()
    ) -> list[tuple[int, str]]: ...
    def max_item_id(self) -> int: ...
    def item_owners(self, ids: Sequence[int], kinds: Sequence[str]) -> dict[int, str]:
        """Owner of each existing item among `ids` of one of `kinds`, unfiltered by visibility:
        for background work that then reads through the owner's eyes."""
        ...

    def put_vector(self, item_id: int, embedder: str, vec: bytes, dim: int) -> None: ...

    # maintenance
    def reindex_text(self, batch: int = 2_000) -> int: ...
    def drop_vectors(self, embedder: str | None) -> int: ...
    def cleanup_orphans(self, keep_embedder: str | None) -> dict[str, int]: ...
    def table_counts(self) -> dict[str, int]: ...

    # audit
    def append_event(self, principal: str, tool: str, outcome: str, detail: dict[str, Any]) -> EventRow: ...


class Store(Protocol):
    """A database: hands out transactions and the change feeds the in-process indexes follow."""

    location: str

    def transaction(self, *, write: bool) -> AbstractContextManager[Tx]: ...
    def vector_changes(self, embedder: str, after_seq: int) -> tuple[int, list[VectorChange]]: ...
    def vector_deletions(self, embedder: str, after_seq: int) -> tuple[int, list[int]]: ...
    def iter_events(self) -> Iterator[EventRow]: ...
    def integrity_check(self) -> list[str]: ...
    def quick_check(self, max_age_s: float = 0.0) -> bool: ...
    def schema_version(self) -> int: ...
    def file_size(self) -> int: ...
    def data_version(self) -> int: ...
    def backup_to(self, target: Path) -> None: ...
    def verify_backup(self, source: Path) -> list[str]: ...
    def restore_from(self, source: Path) -> None: ...
    def close(self) -> None: ...
