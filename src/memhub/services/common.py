"""Building blocks the toolsets' models and services share: safe text, bounded ids, project access."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memhub.core.errors import forbidden, invalid, not_found
from memhub.core.models import WRITE_ROLES, Principal
from memhub.store.base import ProjectRow, Tx

MAX_ID = 2**63 - 1  # SQLite INTEGER; larger values would overflow the driver

# Free-form JSON parameters (metadata, filter criteria): readers (the SDK client's JSON parser among
# them) must never meet data deeper or larger than this.
JSON_MAX_DEPTH = 8  # the value itself is level 1
JSON_MAX_NODES = 256  # keys and array items, all levels together
JSON_MAX_BYTES = 64 * 1024  # serialised as UTF-8 JSON
JSON_MAX_KEY_CHARS = 200


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


def json_depth(value: Any, limit: int) -> int:
    """How deeply `value` nests (a scalar is 0, `{}` is 1), counted without recursion; stops past `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth) for child in children)
    return deepest


def bounded_json(value: Any) -> Any:
    """Free-form JSON a reader can always load: shallow, small, valid text, finite 64-bit numbers."""
    if json_depth(value, JSON_MAX_DEPTH) > JSON_MAX_DEPTH:
        raise ValueError(f"is nested too deeply (at most {JSON_MAX_DEPTH} levels)")
    nodes = 0
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            nodes += len(node)
            for key, child in node.items():
                if len(_clean_text(key)) > JSON_MAX_KEY_CHARS:
                    raise ValueError(f"keys must have at most {JSON_MAX_KEY_CHARS} characters")
                stack.append(child)
        elif isinstance(node, list):
            nodes += len(node)
            stack.extend(node)
        elif isinstance(node, str):
            _clean_text(node)
        elif isinstance(node, bool) or node is None:
            pass
        elif isinstance(node, int):
            if not -MAX_ID - 1 <= node <= MAX_ID:
                raise ValueError("integers must fit in the 64-bit range")
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise ValueError("numbers must be finite")
        else:
            raise ValueError(f"must be JSON (not {type(node).__name__})")
        if nodes > JSON_MAX_NODES:
            raise ValueError(f"has too many keys and items (at most {JSON_MAX_NODES} in all)")
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    if size > JSON_MAX_BYTES:
        raise ValueError(f"is too large ({size} bytes as JSON; at most {JSON_MAX_BYTES} bytes)")
    return value


def json_text(limit: int, inspect: Callable[[Any], None] | None = None) -> AfterValidator:
    """A validator for text holding a JSON document (an import): at most `limit` levels deep, every
    string and key valid text, numbers finite; `inspect` may check the parsed document further
    (raising ValueError). Text that is not JSON passes: the service reports where it breaks."""

    def check(text: str) -> str:
        try:
            parsed = json.loads(text)
        except RecursionError:
            raise ValueError(f"is nested too deeply (at most {limit} levels)") from None
        except ValueError:
            return text
        if json_depth(parsed, limit) > limit:
            raise ValueError(f"is nested too deeply (at most {limit} levels)")
        stack: list[Any] = [parsed]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for key in node:
                    _clean_text(key)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, str):
                _clean_text(node)
            elif isinstance(node, float) and not math.isfinite(node):
                raise ValueError("numbers must be finite")
        if inspect is not None:
            inspect(parsed)
        return text

    return AfterValidator(check)


SafeText = Annotated[str, AfterValidator(_clean_text)]
RequiredText = Annotated[str, AfterValidator(_clean_text), AfterValidator(_not_blank)]
ItemId = Annotated[int, Field(ge=1, le=MAX_ID)]
# A free-form JSON object parameter (metadata, filter criteria...): bounded in depth, size and content.
JsonObject = Annotated[dict[str, Any], AfterValidator(bounded_json)]


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
