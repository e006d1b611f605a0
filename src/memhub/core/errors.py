"""The one exception family services raise; each toolset renders it in its own seed's vocabulary.

A `MemhubError` has a kind (what went wrong, for any toolset). A failure a toolset's seed
names on its own (seed 001's `invalid_path`, seed 002's `Isolation Violation`, seed 000's
`BOUNDARY_DENIED`) is a small subclass of `MemhubError`; a renderer finds its code by class,
walking the error's MRO (`lookup`, as starlette finds exception handlers), and falls back to
the kind. Nothing decides anything from an error's message text or from string codes in
its details.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)


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


class KindError(MemhubError):
    """A `MemhubError` whose subclass fixes its kind: `raise InvalidPath("...")`."""

    KIND: ClassVar[ErrorKind] = ErrorKind.INTERNAL

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(self.KIND, message, **details)


class Unauthorized(KindError):
    """The caller did not prove who it is (no or a bad key), or may not act as it asked."""

    KIND = ErrorKind.FORBIDDEN


class InvalidArguments(KindError):
    """A tool's arguments do not match its input model. `field`: the top-level parameter of
    the first problem reported as `field: message` (None when the first problem is a missing
    or unknown parameter)."""

    KIND = ErrorKind.INVALID

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def lookup(error: BaseException, table: Mapping[type[E], T]) -> T | None:
    """The entry of the most specific class of `error` in `table` (its MRO order), or None."""
    for cls in type(error).__mro__:
        for key, value in table.items():
            if key is cls:
                return value
    return None


@contextmanager
def converted(error: type[E], convert: Callable[[E], MemhubError]) -> Iterator[None]:
    """Failures of class `error` in the block raise as `convert(failure)` (a backend's errors
    as memhub's storage errors, store/*/errors.py)."""
    try:
        yield
    except error as exc:
        raise convert(exc) from exc


def invalid(message: str, **details: Any) -> MemhubError:
    return MemhubError(ErrorKind.INVALID, message, **details)


def not_found(message: str, **details: Any) -> MemhubError:
    return MemhubError(ErrorKind.NOT_FOUND, message, **details)


def forbidden(message: str, **details: Any) -> MemhubError:
    return MemhubError(ErrorKind.FORBIDDEN, message, **details)


def conflict(message: str, **details: Any) -> MemhubError:
    return MemhubError(ErrorKind.CONFLICT, message, **details)
