"""Public ids: the store's integer rows, shown with one prefix per kind of thing.

`mem_12` (assoc memory), `proj_3` (project), `clm_7` (pce claim), `dec_42` (decision),
`note_9` (a vault note section in search results). One codec reads them all with the same
bounds: 1 to 19 ASCII digits, at most `MAX_ID` (SQLite's INTEGER). Session ids (`sess_…`)
are minted and checked here too.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from memhub.core.errors import invalid

MAX_ID = 2**63 - 1  # SQLite INTEGER; larger values would overflow the driver
MAX_DIGITS = 19
SESSION_PREFIX = "sess_"


@dataclass(frozen=True, slots=True)
class IdCodec:
    """`codec(42)` -> `dec_42`; `codec.parse("dec_42")` -> 42 (None when it is not one)."""

    prefix: str
    what: str  # the parameter that carries it, for INVALID messages
    bare: bool = True  # the digits alone are read too (`42` for `dec_42`)

    def __call__(self, row_id: int) -> str:
        return f"{self.prefix}{row_id}"

    def parse(self, text: str) -> int | None:
        raw = text.strip()
        digits = raw.removeprefix(self.prefix)
        if digits == raw and not self.bare:
            return None
        if not digits.isascii() or not digits.isdigit() or len(digits) > MAX_DIGITS:
            return None
        value = int(digits)
        return value if 0 < value <= MAX_ID else None

    def require(self, text: str) -> int:
        """`parse`, or INVALID: `memory_id must look like mem_123, got 'x'`."""
        value = self.parse(text)
        if value is None:
            raise invalid(f"{self.what} must look like {self.prefix}123, got {text[:40]!r}")
        return value


MEM = IdCodec("mem_", "memory_id")
PROJ = IdCodec("proj_", "project_id")
CLM = IdCodec("clm_", "claim_id", bare=False)
DEC = IdCodec("dec_", "id")
NOTE = IdCodec("note_", "note_id", bare=False)


def new_session_id() -> str:
    return f"{SESSION_PREFIX}{secrets.token_hex(6)}"


def parse_session(value: str) -> str:
    """A session id as memhub makes them: `sess_` and 1-64 letters, digits, `-` or `_`."""
    text = value.strip()
    rest = text.removeprefix(SESSION_PREFIX)
    if (
        rest == text
        or not 0 < len(rest) <= 64
        or not all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in rest)
    ):
        raise invalid(f"session_id must look like sess_1a2b3c, got {value[:40]!r}")
    return text
