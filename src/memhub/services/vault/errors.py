"""Seed 001's error vocabulary: invalid_parameter, invalid_path, out_of_scope, not_found,
forbidden, conflict (and memhub's shared codes for failures the seed does not name)."""

from __future__ import annotations

from typing import Any

from memhub.core.errors import CallContext, ErrorKind, MemhubError

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
PATH_CODES = frozenset({"invalid_path", "out_of_scope"})


def invalid_path(message: str) -> MemhubError:
    return MemhubError(ErrorKind.INVALID, message, code="invalid_path")


def out_of_scope(message: str) -> MemhubError:
    return MemhubError(ErrorKind.FORBIDDEN, message, code="out_of_scope")


def render(error: MemhubError, context: CallContext | None = None) -> dict[str, Any]:
    """`{"error": {"code": ..., "message": ...}}`; path failures carry their own code."""
    code = error.details.get("code")
    return {"error": {"code": code if code in PATH_CODES else CODES[error.kind], "message": error.message}}
