"""SQLite failures as memhub's storage errors: one clear message, no path or SQL."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from memhub.core.errors import ErrorKind, MemhubError

log = logging.getLogger(__name__)


def storage_error(exc: sqlite3.Error) -> MemhubError:
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        message = "the database is busy (another writer held it too long); retry the call"
    elif "full" in text:
        message = "the disk is full; nothing was written"
    else:
        message = "the database reported an error; nothing was written"
    log.error("sqlite error: %s", exc)
    return MemhubError(ErrorKind.STORAGE, message)


@contextmanager
def storage_errors() -> Iterator[None]:
    """sqlite3 failures in the block raise as `storage_error`."""
    try:
        yield
    except sqlite3.Error as exc:
        raise storage_error(exc) from exc
