"""PostgreSQL failures as memhub's storage errors: one clear message, no SQL or connection details."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager

import psycopg

from memhub.core.errors import ErrorKind, MemhubError, converted

log = logging.getLogger(__name__)


def storage_errors() -> AbstractContextManager[None]:
    """psycopg failures in the block raise as `storage_error`."""
    return converted(psycopg.Error, storage_error)


def storage_error(exc: psycopg.Error) -> MemhubError:
    if isinstance(exc, psycopg.errors.DiskFull):
        message = "the disk is full; nothing was written"
    elif isinstance(exc, psycopg.OperationalError):
        message = "the database is unavailable; nothing was written, retry the call"
    else:
        message = "the database reported an error; nothing was written"
    log.error("postgresql error: %s", type(exc).__name__)
    return MemhubError(ErrorKind.STORAGE, message)
