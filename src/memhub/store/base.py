"""The storage contract every backend implements, split by concern.

A `Tx` is one transaction; a tool call does all its writes through one `Tx`, so a failed
call changes nothing. `Tx` is the union of seven narrow protocols (items, people, links,
vectors, audit, maintenance, pce); code that needs one concern may ask for just that one.

Every read of items takes a `Viewer` and applies the backend's single visibility filter
(scope, project membership, session, owner, boundary class, expiry), written once for every
SQL backend in `store/sql/`. `tests/store/` holds the contract tests: a second backend joins
them with one entry in `tests/store/backends.py`.

`Store` hands out transactions and the change feeds the in-process indexes follow. What only
a file-backed store can do (backups, integrity checks, file size, a change probe) are
optional protocols, checked with `isinstance` by the code that wants them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from memhub.core.models import ProjectRole, Viewer
from memhub.store.crypto import ContentCipher
from memhub.store.rows import (
    GROUPABLE,
    UPDATABLE,
    ActiveContextRow,
    EventRow,
    ItemBrief,
    ItemQuery,
    ItemRow,
    LinkRow,
    MemberRow,
    NewItem,
    Order,
    PolicyRow,
    PrincipalRow,
    ProjectRow,
    SessionRow,
    VectorChange,
)

__all__ = [
    "BACKUP_PARTS",
    "GROUPABLE",
    "UPDATABLE",
    "ActiveContextRow",
    "AuditTx",
    "Backups",
    "ChangeProbe",
    "Checks",
    "EventRow",
    "FileSize",
    "ItemBrief",
    "ItemQuery",
    "ItemRow",
    "ItemsTx",
    "LinkRow",
    "LinksTx",
    "MaintenanceTx",
    "MemberRow",
    "NearestVectors",
    "NewItem",
    "Order",
    "PceTx",
    "PeopleTx",
    "PolicyRow",
    "PrincipalRow",
    "ProjectRow",
    "SessionRow",
    "Store",
    "Tx",
    "VectorChange",
    "VectorsTx",
    "Visibility",
]

# What a backup may leave out (`Backups.backup_to(exclude=...)`).
BACKUP_PARTS = ("memories", "associations", "sessions", "projects")


class ItemsTx(Protocol):
    """Items: everything searchable (memory, claim, decision, topic, log, note chunk)."""

    now: str

    def insert_item(self, item: NewItem) -> ItemRow: ...
    def get_item(self, viewer: Viewer, item_id: int, kinds: Sequence[str] = ()) -> ItemRow | None: ...
    def query_items(self, viewer: Viewer, query: ItemQuery) -> list[ItemRow]: ...
    def query_briefs(self, viewer: Viewer, query: ItemQuery) -> list[ItemBrief]:
        """`query_items` reading only ItemBrief's columns (order not guaranteed)."""
        ...

    def norm_texts(self, ids: Sequence[int]) -> dict[int, str]:
        """Item id -> its normalised title and body (callers pass ids the viewer may read)."""
        ...

    def subtree(self, viewer: Viewer, root_id: int, kind: str, limit: int) -> list[ItemRow]:
        """`root_id` and its descendants of `kind` (through `parent_id`), breadth first."""
        ...

    def text_search(
        self,
        viewer: Viewer,
        terms: Sequence[str],
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
        budget: int = ...,
    ) -> list[tuple[int, float]]:
        """(item id, relevance >= 0, higher is better), best first, for items matching any of
        `terms`. Terms are plain normalised text (core.text.search_terms): a word, or a CJK run
        that must occur as a whole (one CJK character: any word starting with it). The backend
        builds its own query from them; no term can be query syntax. At most ~`budget`
        matching rows are ranked, so the cost stays bounded as the store grows."""
        ...

    def text_search_hidden(
        self,
        viewer: Viewer,
        wider: Viewer,
        terms: Sequence[str],
        kinds: Sequence[str],
        project_id: int | None,
        limit: int,
        budget: int = ...,
    ) -> tuple[list[tuple[int, float]], int]:
        """`text_search`'s hits for `viewer`, and, counted in the same query, how many of the
        rows it ranked at least as high as its last hit `wider` may read and `viewer` may not
        (all it ranked when it found fewer than `limit`): what a filter hid, as a count."""
        ...

    def visible_ids(
        self, viewer: Viewer, ids: Sequence[int], kinds: Sequence[str], project_id: int | None
    ) -> set[int]:
        """The subset of `ids` the viewer may read (any number of ids)."""
        ...

    def update_item(self, item_id: int, changes: dict[str, Any]) -> ItemRow:
        """Change `UPDATABLE` columns; new text is re-indexed and the item's vectors dropped.
        Raises MemhubError(NOT_FOUND) for a missing item (as do update_project, end_session)."""
        ...

    def delete_items(self, ids: Sequence[int]) -> int: ...
    def touch_access(self, counts: Mapping[int, int]) -> None:
        """Add `counts[id]` accesses to each item (items gone meanwhile are skipped)."""
        ...

    def count_items(self, viewer: Viewer, query: ItemQuery, cap: int | None = None) -> int: ...
    def group_counts(self, viewer: Viewer, query: ItemQuery, column: str) -> dict[str, int]: ...
    def tag_counts(self, viewer: Viewer, query: ItemQuery, limit: int) -> dict[str, int]: ...
    def visible_counts(self, viewer: Viewer) -> list[tuple[str, str, int | None, int]]:
        """(kind, scope, project id, items) for every item the viewer may read, grouped: one
        indexed read, whatever the store's size (the overview's figures)."""
        ...

    def max_item_id(self) -> int: ...
    def item_owners(self, ids: Sequence[int], kinds: Sequence[str]) -> dict[int, str]:
        """Owner of each existing item among `ids` of one of `kinds`, unfiltered by visibility:
        for background work that then reads through the owner's eyes."""
        ...


class PeopleTx(Protocol):
    """Principals, projects with their members and roles, sessions."""

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
    def project_item_count(self, project_id: int) -> int:
        """Every record the project holds, unfiltered by visibility (a delete must not be
        guarded by what one caller happens to see)."""
        ...

    def list_members(self, project_id: int) -> list[MemberRow]: ...
    def remove_member(self, project_id: int, principal: str) -> bool: ...
    def list_memberships(
        self, principal: str, roles: Sequence[ProjectRole], limit: int
    ) -> list[tuple[ProjectRow, ProjectRole]]: ...

    def ensure_principal(self, principal: str, kind: str = "user") -> PrincipalRow:
        """The principal, created on first sight. The first principal of a store is its admin."""
        ...

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


class LinksTx(Protocol):
    """Typed edges between items: associations, supersedes, relations, wiki links."""

    def upsert_link(self, src: int, dst: int, type: str, subtype: str | None, strength: float) -> None:
        """One edge per (src, dst, type, subtype); a repeated edge keeps the stronger strength."""
        ...

    def links_of(self, ids: Sequence[int], types: Sequence[str]) -> list[LinkRow]:
        """Edges touching any of `ids` (either direction), of the given types (all when empty)."""
        ...


class VectorsTx(Protocol):
    """Embeddings, keyed by embedder id; every put and delete is visible to `Store.vector_changes`."""

    def get_vector(self, item_id: int, embedder: str) -> bytes | None: ...
    def get_vectors(self, item_ids: Sequence[int], embedder: str) -> dict[int, bytes]:
        """The stored vectors of `item_ids` (those that have one), in one read."""
        ...

    def missing_vectors(
        self, embedder: str, limit: int, after_id: int = 0, ids: Sequence[int] = ()
    ) -> list[tuple[int, str]]:
        """(item id, text to embed) for items past `after_id` (or among `ids`) lacking a vector."""
        ...

    def vector_count(self, embedder: str) -> int: ...
    def put_vector(self, item_id: int, embedder: str, vec: bytes, dim: int) -> bool:
        """Store the item's vector; False (and nothing written) when the item no longer exists
        (it was deleted while it was being embedded: not an error)."""
        ...


class AuditTx(Protocol):
    """The append-only, hash-chained audit log.

    Linearity: `append_event` reads the chain's head and inserts the event after it while
    holding a store-wide exclusive lock that lasts until the transaction commits, so two
    writers (threads, processes, replicas) can never both extend the same head. SQLite: the
    writer lock every write transaction takes (`BEGIN IMMEDIATE`). PostgreSQL: a transaction
    advisory lock (`pg_advisory_xact_lock`) on one fixed key, taken before the head is read.
    Only write transactions may append.
    """

    def append_event(
        self, principal: str, tool: str, outcome: str, detail: dict[str, Any], at: str | None = None
    ) -> EventRow:
        """Append one event (`at`: when the call happened; default the transaction's time)."""
        ...

    def events_page(
        self,
        *,
        before: int | None,
        limit: int,
        scan: int,
        principal: str = "",
        tool_prefix: str = "",
        outcome: str = "",
        mentions: str = "",
    ) -> tuple[list[EventRow], int | None]:
        """The newest `limit` events older than `before` (id) matching the filters (exact
        principal and outcome, a tool prefix, `mentions`: a string the detail's JSON holds as a
        whole value such as "mem_12"), newest first, and the id to pass as `before` for the next
        page (None: the log's start was reached). Keyset paging on the primary key: one page
        reads at most `scan` events whatever the log's size, so a rare filter may answer a
        short page with a next id to continue from."""
        ...


class MaintenanceTx(Protocol):
    """Rebuilding indexes and removing what nothing refers to."""

    def reindex_text(self, batch: int = 2_000) -> int: ...
    def drop_vectors(self, embedder: str | None) -> int: ...
    def cleanup_orphans(self, keep_embedder: str | None) -> dict[str, int]: ...
    def table_counts(self) -> dict[str, int]: ...


class PceTx(Protocol):
    """Seed 000's own records: policy versions, feedback signals, active contexts."""

    def insert_policy(self, row: PolicyRow) -> None:
        """Store an applied policy; it becomes the current one. Its version must be new."""
        ...

    def current_policy(self) -> PolicyRow | None:
        """The latest applied policy (None: none was ever applied)."""
        ...

    def policy_versions(self) -> list[str]:
        """Every applied version, oldest first."""
        ...

    def get_policy(self, version: str) -> PolicyRow | None: ...

    def add_feedback(
        self, claim_id: int, principal: str, ts_bucket: int, signal: str, score: float | None
    ) -> bool:
        """Record one signal; False (nothing written) when (claim, principal, bucket) has one."""
        ...

    def insert_active_context(self, row: ActiveContextRow, purge_before: str) -> None:
        """Store an active context, and drop those that expired before `purge_before` (an
        expired context is kept a while so a late reader hears "expired", not "unknown")."""
        ...

    def get_active_context(self, context_id: str) -> ActiveContextRow | None:
        """The context, expired or not (the caller tells expired from unknown)."""
        ...


class Tx(ItemsTx, PeopleTx, LinksTx, VectorsTx, AuditTx, MaintenanceTx, PceTx, Protocol):
    """One transaction. Methods raise MemhubError(STORAGE) on database failure (in the block
    that opened it; elsewhere, inside `failures()`)."""

    def failures(self) -> AbstractContextManager[None]:
        """Database failures inside the block raise MemhubError(STORAGE), as they do through
        the block that opened the transaction: for the second reader of `Store.read_pair`,
        used on another thread."""
        ...


class Store(Protocol):
    """A database: hands out transactions and the change feeds the in-process indexes follow."""

    location: str
    backend: str  # "sqlite", ...: picks the implementations that suit it (vector search)

    def transaction(self, *, write: bool) -> AbstractContextManager[Tx]:
        """A read transaction sees one snapshot and never waits for writers; a write
        transaction holds the store's writer lock until it commits."""
        ...

    def read_pair(self) -> AbstractContextManager[tuple[Tx, Tx | None]]:
        """`transaction(write=False)`, and a second read transaction that sees the same snapshot
        on a connection of its own, for work on another thread meanwhile (the search's vector
        side beside its keyword side); None where the backend cannot promise the same snapshot
        without waiting. Both end when the block does: the second's user must be done by then."""
        ...

    def vector_changes(
        self, embedder: str, after_seq: int, limit: int | None = None
    ) -> tuple[int, list[VectorChange]]:
        """Vector puts and deletes after `after_seq`, the latest per item, in log order, and the
        new high-water mark. With `limit`, one page: only the next `limit` entries of the log are
        read (the latest per item among them, with the item's vector as it is now), and the mark
        is the last of them; an item changed again later appears again in a later page, so
        applying the pages in order ends in the state one unbounded read gives."""
        ...

    def vector_deletions(self, embedder: str, after_seq: int) -> tuple[int, list[int]]: ...
    def iter_events(self) -> Iterator[EventRow]: ...
    def schema_version(self) -> int: ...
    def close(self) -> None: ...


@runtime_checkable
class Backups(Protocol):
    """Online backups of the whole store, verified restores."""

    def backup_to(self, target: Path, exclude: Sequence[str] = ()) -> None:
        """A consistent copy at `target`, without the `BACKUP_PARTS` named in `exclude`."""
        ...

    def verify_backup(self, source: Path) -> list[str]:
        """Problems that make `source` unfit to restore (empty list: fit)."""
        ...

    def restore_from(self, source: Path) -> None: ...


@runtime_checkable
class Encryption(Protocol):
    """Content encrypted at rest (store/crypto.py) and its key rotation."""

    def rotate_encryption(self, new_key: bytes | None, audit: Callable[[Tx], object] | None = None) -> int:
        """Re-encrypt every item's text under `new_key` (None: plaintext); items rewritten.
        `audit(tx)` runs inside the rotation's transaction, before its commit."""
        ...


@runtime_checkable
class Sealing(Protocol):
    """The store's content cipher (None: not encrypted), for what memhub keeps beside the store
    (proposal files): sealed when the store's text is."""

    @property
    def cipher(self) -> ContentCipher | None: ...


@runtime_checkable
class Checks(Protocol):
    """Integrity checks of the stored data."""

    def integrity_check(self) -> list[str]: ...
    def quick_check(self, max_age_s: float = 0.0) -> bool: ...


@runtime_checkable
class FileSize(Protocol):
    def file_size(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Visibility:
    """What a read may return, as `ItemsTx.visible_ids` takes it: the items `viewer` may read,
    of `kinds` (all when empty), in `project_id` (any when None)."""

    viewer: Viewer
    kinds: tuple[str, ...] = ()
    project_id: int | None = None


@runtime_checkable
class NearestVectors(Protocol):
    """Nearest neighbours found by the database itself, through its own vector index
    (PostgreSQL: pgvector's HNSW), so no process keeps a copy of the vectors to go stale."""

    def nearest_vectors(
        self, embedder: str, query: Sequence[float], k: int, visible: Visibility | None = None
    ) -> list[tuple[int, float]]:
        """The `k` (item id, cosine) pairs of `embedder`'s vectors closest to `query`, best
        first (ties by id), among the items `visible` admits (all when None): the visibility
        filter runs in the same query, so a restrictive one never leaves fewer than `k` when
        `k` are visible. Approximate (the index's recall), cosines exact."""
        ...


@runtime_checkable
class ChangeProbe(Protocol):
    """A cheap "did another connection commit?" probe."""

    def data_version(self) -> int: ...
