"""Seed 004's error vocabulary: INVALID_PARAMETER, NOT_FOUND, DATABASE_ERROR."""

from __future__ import annotations

from typing import Any

from memhub.core.errors import CallContext, ErrorKind, MemhubError

CODES = {
    ErrorKind.INVALID: "INVALID_PARAMETER",
    ErrorKind.FORBIDDEN: "INVALID_PARAMETER",
    ErrorKind.CONFLICT: "INVALID_PARAMETER",
    ErrorKind.TOO_LARGE: "INVALID_PARAMETER",
    ErrorKind.RATE_LIMITED: "INVALID_PARAMETER",
    ErrorKind.NOT_FOUND: "NOT_FOUND",
    ErrorKind.TIMEOUT: "DATABASE_ERROR",
    ErrorKind.UNAVAILABLE: "DATABASE_ERROR",
    ErrorKind.STORAGE: "DATABASE_ERROR",
    ErrorKind.INTERNAL: "DATABASE_ERROR",
}


def render(error: MemhubError, context: CallContext | None = None) -> dict[str, Any]:
    """`{"error": {"code": ..., "message": ...}}` as the seed shows it."""
    return {"error": {"code": CODES[error.kind], "message": error.message}}
