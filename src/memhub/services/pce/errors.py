"""Seed 000's error envelope and vocabulary (§1.x, §6).

`{"error": {"code", "message", "details"}, "request_id", "trace_id", "policy_version"}`.
A service raises a seed code as its class (`BoundaryDenied`, `UnknownClaim`, ...), found by
walking the error's MRO; a validation error names its parameter (`scope` -> INVALID_SCOPE);
otherwise the code follows from the error's kind and the tool. `details.http` is the HTTP
status the seed gives the code.
"""

from __future__ import annotations

from typing import Any

from memhub.core.errors import (
    CallContext,
    ErrorKind,
    InvalidArguments,
    KindError,
    MemhubError,
    Unauthorized,
    lookup,
)

HTTP = {
    "VALIDATION_ERROR": 400,
    "INVALID_SCOPE": 422,
    "INVALID_BOUNDARY": 422,
    "INVALID_POLICY": 422,
    "BOUNDARY_DENIED": 403,
    "UNKNOWN_CLAIM": 404,
    "ACTIVE_CONTEXT_EXPIRED": 410,
    "DUPLICATE": 409,
    "POLICY_MISSING": 424,
    "RATE_LIMIT": 429,
    "UNAUTHORIZED": 401,
    "PAYLOAD_TOO_LARGE": 413,
    "UPSERT_FAILED": 500,
    "ACTIVATE_FAILED": 500,
    "FEEDBACK_FAILED": 500,
    "BOUNDARY_ERROR": 500,
    "INTERNAL": 500,
}
_FAILED = {  # §1.x: a tool's own "execution failed" code for storage trouble and timeouts
    "pce.memory.upsert": "UPSERT_FAILED",
    "pce.memory.activate": "ACTIVATE_FAILED",
    "pce.memory.feedback": "FEEDBACK_FAILED",
    "pce.memory.boundary.validate": "BOUNDARY_ERROR",
}
_BY_KIND = {
    ErrorKind.INVALID: "VALIDATION_ERROR",
    ErrorKind.NOT_FOUND: "UNKNOWN_CLAIM",
    ErrorKind.FORBIDDEN: "BOUNDARY_DENIED",
    ErrorKind.CONFLICT: "DUPLICATE",
    ErrorKind.TOO_LARGE: "PAYLOAD_TOO_LARGE",
    ErrorKind.RATE_LIMITED: "RATE_LIMIT",
    ErrorKind.INTERNAL: "INTERNAL",
}
_FIELD_CODES = {"scope": "INVALID_SCOPE", "boundary_class": "INVALID_BOUNDARY"}
DEFAULT_POLICY_VERSION = "0.0.0"


class BoundaryDenied(KindError):
    """The caller's boundary or role does not allow this (403)."""

    KIND = ErrorKind.FORBIDDEN


class InvalidScope(KindError):
    """The scope names no place the caller may write to (422)."""

    KIND = ErrorKind.INVALID


class InvalidBoundary(KindError):
    """The text needs a stricter boundary class than the one given (422)."""

    KIND = ErrorKind.INVALID


class UnknownClaim(KindError):
    """No such claim or active context for this caller (404)."""

    KIND = ErrorKind.NOT_FOUND


class ContextExpired(KindError):
    """The active context has expired: activate again (410)."""

    KIND = ErrorKind.NOT_FOUND


class Duplicate(KindError):
    """The same text is already a claim of another kind or class (409)."""

    KIND = ErrorKind.CONFLICT


class PolicyMissing(KindError):
    """The server requires an applied policy and none is (424)."""

    KIND = ErrorKind.UNAVAILABLE


BY_CLASS: dict[type[KindError], str] = {
    BoundaryDenied: "BOUNDARY_DENIED",
    InvalidScope: "INVALID_SCOPE",
    InvalidBoundary: "INVALID_BOUNDARY",
    UnknownClaim: "UNKNOWN_CLAIM",
    ContextExpired: "ACTIVE_CONTEXT_EXPIRED",
    Duplicate: "DUPLICATE",
    PolicyMissing: "POLICY_MISSING",
    Unauthorized: "UNAUTHORIZED",
}


def code_of(error: MemhubError, tool: str) -> str:
    named = lookup(error, BY_CLASS)
    if named is not None:
        return named
    if isinstance(error, InvalidArguments) and error.field in _FIELD_CODES:
        return _FIELD_CODES[error.field]
    if error.kind is ErrorKind.INVALID and tool == "pce.memory.policy.apply":
        return "INVALID_POLICY"
    if error.kind in _BY_KIND:
        return _BY_KIND[error.kind]
    return _FAILED.get(tool, "INTERNAL")  # storage, timeout, unavailable


def render(error: MemhubError, context: CallContext) -> dict[str, Any]:
    code = code_of(error, context.tool)
    details: dict[str, Any] = {"http": HTTP[code]}
    if code == "INVALID_POLICY":
        details["alias"] = "POLICY_INVALID"  # §1.x names the same failure POLICY_INVALID
    details.update(
        (k, v) for k, v in error.details.items() if isinstance(v, str | int | float | bool) or _small_list(v)
    )
    if error.kind is ErrorKind.TIMEOUT:
        details["reason"] = "timeout"
    return {
        "error": {"code": code, "message": error.message, "details": details},
        "request_id": context.request_id,
        "trace_id": context.trace_id,
        "policy_version": context.policy_version or DEFAULT_POLICY_VERSION,
    }


def _small_list(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= 20 and all(isinstance(v, str) for v in value)
