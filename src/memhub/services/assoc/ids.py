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
