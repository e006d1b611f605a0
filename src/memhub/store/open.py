"""`open_store(url)`: the one factory that turns a database location into a `Store`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memhub.core.clock import Clock
from memhub.core.errors import ErrorKind, MemhubError
from memhub.store.base import Store

SCHEMES = ("sqlite", "postgresql")


def open_store(
    url: str | Path, *, clock: Clock | None = None, keys: Sequence[bytes] = (), check: bool = False
) -> Store:
    """A store for `url`: a file path or `sqlite:///path` opens the embedded SQLite backend;
    `postgresql://…` opens the scale-out PostgreSQL backend (store/postgres/).
    `keys` turn on content encryption (store/crypto.py): the first encrypts, all decrypt.
    `check`: refuse a damaged store before writing to it (what `memhub serve` asks)."""
    text = str(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "sqlite", text
    elif scheme == "sqlite":
        rest = rest.removeprefix("/") if rest.startswith("//") else rest  # sqlite:////abs -> /abs
    if scheme == "sqlite":
        from memhub.store.sqlite import SqliteStore

        if not rest:
            raise ValueError("a SQLite location needs a file path")
        return SqliteStore(Path(rest).expanduser(), clock=clock, keys=keys, check=check)
    if scheme in ("postgresql", "postgres"):
        try:
            from memhub.store.postgres import PostgresStore
        except ImportError:
            raise MemhubError(
                ErrorKind.UNAVAILABLE,
                "the PostgreSQL backend needs psycopg: install memhub with its `postgres` extra",
            ) from None
        return PostgresStore(text, clock=clock, keys=keys)  # `check`: PostgreSQL checks its own pages
    raise ValueError(f"unknown database scheme {scheme!r}; expected a path or one of {', '.join(SCHEMES)}://")
