"""Identity and access vocabulary shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal


class GlobalRole(StrEnum):
    ADMIN = "admin"
    MEMBER = "member"


class ProjectRole(StrEnum):
    OWNER = "owner"  # the creator: editor rights plus membership management
    EDITOR = "editor"
    VIEWER = "viewer"


WRITE_ROLES = frozenset({ProjectRole.OWNER, ProjectRole.EDITOR})


class Scope(StrEnum):
    """Who may see an item (seed 003's domains; seed 000's scopes map onto these)."""

    GLOBAL = "global"
    USER = "user"
    PROJECT = "project"
    SESSION = "session"


class Kind(StrEnum):
    """What an item of the one store is, whichever toolset wrote it."""

    MEMORY = "memory"  # assoc (seed 003)
    NOTE = "note"  # a section of a vault note (seed 001), indexed for search
    TOPIC = "topic"  # discussion (seed 004)
    LOG = "log"  # discussion
    DECISION = "decision"  # the one decision model (seeds 002 and 004)
    DEPRECATION = "deprecation"  # a record retiring a decision (its body: the reason)
    CLAIM = "claim"  # pce (seed 000)
    ENTITY = "entity"  # pce: something claims mention


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of a tool: a local user (stdio), an API-key holder (HTTP) or a person at the CLI."""

    id: str
    role: GlobalRole = GlobalRole.MEMBER  # a snapshot for display; access.is_admin reads the store
    via: str = "mcp"  # "mcp" writes are agent writes; "cli"/"dashboard" writes are human
    session_id: str | None = None
    default_project: str | None = None


class Boundary(StrEnum):
    """How sensitive an item is (seed 000's boundary classes)."""

    PUBLIC = "public"
    INTERNAL = "internal"
    PII = "pii"
    SECRET = "secret"


# What a reader sees when nothing (a policy, an explicit allow) says otherwise: fail closed,
# so pii and secret items are never returned unless a caller's policy allows their class.
DEFAULT_BOUNDARIES = frozenset({Boundary.PUBLIC.value, Boundary.INTERNAL.value})

SessionRule = Literal["own", "current"]


@dataclass(frozen=True, slots=True)
class Viewer:
    """Whose eyes a read goes through: the single visibility filter is built from this.

    `sessions` decides which session-scope items are seen: "own" every session of the
    principal (reading one item by id), "current" only those of `session_id` (searches: what
    this session wrote; none when `session_id` is None). `boundaries`: the boundary classes
    this read may return.
    """

    principal: str
    now: str
    session_id: str | None = None
    sessions: SessionRule = "own"
    boundaries: frozenset[str] = field(default=DEFAULT_BOUNDARIES)
