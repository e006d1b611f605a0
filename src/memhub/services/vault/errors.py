"""Seed 001's error vocabulary: invalid_parameter, invalid_path, out_of_scope, not_found,
forbidden, conflict (and memhub's shared codes for failures the seed does not name)."""

from __future__ import annotations

from typing import Any

from memhub.core.errors import CallContext, ErrorKind, KindError, MemhubError, lookup

CODES = {
    ErrorKind.INVALID: "invalid_parameter",
    ErrorKind.NOT_FOUND: "not_found",
    ErrorKind.FORBIDDEN: "forbidden",
    ErrorKind.CONFLICT: "conflict",
    ErrorKind.TOO_LARGE: "invalid_parameter",
    ErrorKind.RATE_LIMITED: "rate_limited",
    ErrorKind.TIMEOUT: "timeout",
    ErrorKind.UNAVAILABLE: "unavailable",
    ErrorKind.STORAGE: "internal_error",
    ErrorKind.INTERNAL: "internal_error",
}


class InvalidPath(KindError):
    """A path memhub will not use (control characters, backslashes, a folder for a file...)."""

    KIND = ErrorKind.INVALID


class OutOfScope(KindError):
    """A path that leads outside the vault (absolute, `..`, a symlink pointing out)."""

    KIND = ErrorKind.FORBIDDEN


BY_CLASS: dict[type[KindError], str] = {InvalidPath: "invalid_path", OutOfScope: "out_of_scope"}


def render(error: MemhubError, context: CallContext | None = None) -> dict[str, Any]:
    """`{"error": {"code": ..., "message": ...}}`; path failures have their own code."""
    return {"error": {"code": lookup(error, BY_CLASS) or CODES[error.kind], "message": error.message}}
