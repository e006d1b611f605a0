"""Seed 002's error vocabulary: a `BaseResponse` with `status: "error"` and a message that
starts with the seed's name for what went wrong.

| message starts with   | when |
|-----------------------|------|
| Permission Denied     | role too low (viewer; not admin), AGENT_MEMORY_SECRET missing or wrong |
| Isolation Violation   | an agent (MCP) tries to supersede a decision a person recorded |
| Rate Limit Exceeded   | the per-principal decision cooldown, or a per-minute rate limit |
| PI1 Violation         | accepting a proposal inside its review window |
| Validation Error      | a missing, malformed or out-of-range argument |
| Not Found / Conflict  | no such proposal; a proposal accepted twice; superseding twice |
"""

from __future__ import annotations

from typing import Any

from memhub.core.errors import CallContext, ErrorKind, KindError, MemhubError, lookup

PERMISSION = "Permission Denied"
ISOLATION = "Isolation Violation"
RATE = "Rate Limit Exceeded"
PI1 = "PI1 Violation"
VALIDATION = "Validation Error"

LABELS = {
    ErrorKind.INVALID: VALIDATION,
    ErrorKind.TOO_LARGE: VALIDATION,
    ErrorKind.NOT_FOUND: "Not Found",
    ErrorKind.FORBIDDEN: PERMISSION,
    ErrorKind.CONFLICT: "Conflict",
    ErrorKind.RATE_LIMITED: RATE,
    ErrorKind.UNAVAILABLE: "Unavailable",
    ErrorKind.TIMEOUT: "Timeout",
    ErrorKind.STORAGE: "Database Error",
    ErrorKind.INTERNAL: "Internal Error",
}


class IsolationViolation(KindError):
    """An agent tried to change what a person recorded."""

    KIND = ErrorKind.FORBIDDEN


class PI1Violation(KindError):
    """A proposal accepted inside its review window (`retry_after_s`: until it ends)."""

    KIND = ErrorKind.FORBIDDEN

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message, retry_after_s=retry_after_s)


BY_CLASS: dict[type[KindError], str] = {IsolationViolation: ISOLATION, PI1Violation: PI1}


def label(error: MemhubError) -> str:
    return lookup(error, BY_CLASS) or LABELS[error.kind]


def render(error: MemhubError, context: CallContext | None = None) -> dict[str, Any]:
    """`{"status": "error", "message": "PI1 Violation: ..."}` (+ `retry_after_s` when waiting helps)."""
    body: dict[str, Any] = {"status": "error", "message": f"{label(error)}: {error.message}"}
    retry = error.details.get("retry_after_s")
    if isinstance(retry, int | float):
        body["retry_after_s"] = retry
    return body
