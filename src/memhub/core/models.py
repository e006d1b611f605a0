"""Identity and access vocabulary shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


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


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of a tool: a local user (stdio), an API-key holder (HTTP) or a person at the CLI."""

    id: str
    role: GlobalRole = GlobalRole.MEMBER
    via: str = "mcp"  # "mcp" writes are agent writes; "cli"/"dashboard" writes are human
    session_id: str | None = None
    default_project: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role is GlobalRole.ADMIN


@dataclass(frozen=True, slots=True)
class Viewer:
    """Whose eyes a read goes through: the single visibility filter is built from this."""

    principal: str
    now: str
    session_id: str | None = None
    boundaries: frozenset[str] | None = field(default=None)  # None: every boundary class
