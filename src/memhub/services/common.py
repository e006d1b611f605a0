"""Building blocks the toolsets' models share: safe text, bounded ids, strict inputs."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

MAX_ID = 2**63 - 1  # SQLite INTEGER; larger values would overflow the driver


def _clean_text(value: str) -> str:
    """Reject text SQLite cannot store faithfully: lone surrogates (bad UTF-16) and NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains invalid unicode (a lone surrogate)") from None
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


SafeText = Annotated[str, AfterValidator(_clean_text)]
RequiredText = Annotated[str, AfterValidator(_clean_text), AfterValidator(_not_blank)]
ItemId = Annotated[int, Field(ge=1, le=MAX_ID)]


class StrictInput(BaseModel):
    """Tool input: unknown properties and silently coerced types are errors, not guesses."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Output(BaseModel):
    model_config = ConfigDict(extra="forbid")
