"""SQLite failures as memhub's storage errors: one clear message, no path or SQL."""

from __future__ import annotations

import logging
import sqlite3
from contextlib import AbstractContextManager

from memhub.core.errors import ErrorKind, MemhubError, converted

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


def storage_errors() -> AbstractContextManager[None]:
    """sqlite3 failures in the block raise as `storage_error`."""
    return converted(sqlite3.Error, storage_error)
