"""Error vocabulary of the assoc toolset (seed 003 names none; these follow seed 001's style)."""

from __future__ import annotations

from typing import Any

from memhub.core.errors import CallContext, ErrorKind, MemhubError

CODES = {
    ErrorKind.INVALID: "invalid_parameter",
    ErrorKind.NOT_FOUND: "not_found",
    ErrorKind.FORBIDDEN: "permission_denied",
    ErrorKind.CONFLICT: "conflict",
    ErrorKind.TOO_LARGE: "payload_too_large",
    ErrorKind.RATE_LIMITED: "rate_limited",
    ErrorKind.TIMEOUT: "timeout",
    ErrorKind.UNAVAILABLE: "unavailable",
    ErrorKind.STORAGE: "storage_error",
    ErrorKind.INTERNAL: "internal_error",
}


def render(error: MemhubError, context: CallContext | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": CODES[error.kind], "message": error.message}
    details = {k: v for k, v in error.details.items() if isinstance(v, str | int | float | bool)}
    if details:
        body["details"] = details
    return {"error": body}
