"""The one exception family services raise; each toolset renders it in its own seed's vocabulary."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ErrorKind(StrEnum):
    """What went wrong, independent of any toolset's error codes."""

    INVALID = "invalid"  # bad parameter value or combination
    NOT_FOUND = "not_found"  # the named resource does not exist (or is not visible to the caller)
    FORBIDDEN = "forbidden"  # the caller may see the resource but not do this to it
    CONFLICT = "conflict"  # uniqueness or state conflict (duplicate name, stale version)
    TOO_LARGE = "too_large"  # payload over the tool's limit
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"  # a dependency (embedder, disk) is not ready
    TIMEOUT = "timeout"  # the call ran past its time limit (and changed nothing)
    STORAGE = "storage"  # the database failed (locked too long, disk full, corrupt)
    INTERNAL = "internal"  # a bug: never leaks details to the client


@dataclass(frozen=True, slots=True)
class CallContext:
    """What an error renderer may need about the failed call (seed 000's envelope carries
    `request_id`, `trace_id` and `policy_version`)."""

    tool: str
    toolset: str
    request_id: str
    trace_id: str
    policy_version: str | None = None


class MemhubError(Exception):
    """A failure the caller must hear about, with a safe, human-readable message."""

    def __init__(self, kind: ErrorKind, message: str, **details: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.details = details


def invalid(message: str, **details: Any) -> MemhubError:
    return MemhubError(ErrorKind.INVALID, message, **details)


def not_found(message: str, **details: Any) -> MemhubError:
    return MemhubError(ErrorKind.NOT_FOUND, message, **details)


def forbidden(message: str, **details: Any) -> MemhubError:
    return MemhubError(ErrorKind.FORBIDDEN, message, **details)


def conflict(message: str, **details: Any) -> MemhubError:
    return MemhubError(ErrorKind.CONFLICT, message, **details)
