"""Building blocks the toolsets' models and services share: safe text, bounded ids, project access."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memhub.core.errors import forbidden, invalid, not_found
from memhub.core.models import WRITE_ROLES, Principal
from memhub.store.base import ProjectRow, Tx

MAX_ID = 2**63 - 1  # SQLite INTEGER; larger values would overflow the driver


def _clean_text(value: str) -> str:
    """Reject text SQLite cannot store faithfully: lone surrogates (bad UTF-16) and NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains invalid unicode (a lone surrogate)") from None
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


SafeText = Annotated[str, AfterValidator(_clean_text)]
RequiredText = Annotated[str, AfterValidator(_clean_text), AfterValidator(_not_blank)]
ItemId = Annotated[int, Field(ge=1, le=MAX_ID)]


class StrictInput(BaseModel):
    """Tool input: unknown properties and silently coerced types are errors, not guesses."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Output(BaseModel):
    model_config = ConfigDict(extra="forbid")


def project_for(tx: Tx, actor: Principal, project_id: int, *, write: bool) -> ProjectRow:
    """The project, if the actor is a member; write access needs the owner or editor role.

    A project the actor is not a member of is reported as missing: its existence is not leaked.
    """
    project = tx.get_project(project_id)
    role = tx.member_role(project_id, actor.id) if project else None
    if project is None or role is None:
        raise not_found(f"project {project_id} not found")
    if write and role not in WRITE_ROLES:
        raise forbidden(f"project {project_id} is read-only for you (role: {role})")
    return project


def current_project(tx: Tx, actor: Principal) -> ProjectRow:
    """The actor's current project (`--project` / git root name), created on first use."""
    name = actor.default_project
    if not name:
        raise invalid("no current project: pass one explicitly or start memhub with --project")
    project = tx.get_project_by_name(name)
    if project is None:
        return tx.insert_project(name, None, {}, actor.id)
    if tx.member_role(project.id, actor.id) is None:
        raise not_found(f"project {name!r} not found")
    return project
