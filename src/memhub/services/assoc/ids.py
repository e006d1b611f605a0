"""Seed 003 presents ids as strings (`mem_123`, `proj_789`); the rows underneath are integers."""

from __future__ import annotations

import secrets

from memhub.core.errors import invalid

MAX_ID = 2**63 - 1


def mem_id(item_id: int) -> str:
    return f"mem_{item_id}"


def proj_id(project_id: int) -> str:
    return f"proj_{project_id}"


def new_session_id() -> str:
    return f"sess_{secrets.token_hex(6)}"


def _parse(value: str, prefix: str, what: str) -> int:
    text = value.strip()
    digits = text.removeprefix(prefix)
    if not digits.isascii() or not digits.isdigit() or len(digits) > 19 or not 0 < int(digits) <= MAX_ID:
        raise invalid(f"{what} must look like {prefix}123, got {value[:40]!r}")
    return int(digits)


def parse_mem(value: str) -> int:
    return _parse(value, "mem_", "memory_id")


def parse_proj(value: str) -> int:
    return _parse(value, "proj_", "project_id")


def parse_session(value: str) -> str:
    """A session id as memhub makes them: `sess_` and 1-64 letters, digits, `-` or `_`."""
    text = value.strip()
    rest = text.removeprefix("sess_")
    if (
        rest == text
        or not 0 < len(rest) <= 64
        or not all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in rest)
    ):
        raise invalid(f"session_id must look like sess_1a2b3c, got {value[:40]!r}")
    return text
