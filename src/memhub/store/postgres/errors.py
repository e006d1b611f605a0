"""PostgreSQL failures as memhub's storage errors: one clear message, no SQL or connection details."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from memhub.core.errors import ErrorKind, MemhubError

log = logging.getLogger(__name__)


@contextmanager
def storage_errors() -> Iterator[None]:
    try:
        yield
    except psycopg.Error as exc:
        raise storage_error(exc) from exc


def storage_error(exc: psycopg.Error) -> MemhubError:
    if isinstance(exc, psycopg.errors.DiskFull):
        message = "the disk is full; nothing was written"
    elif isinstance(exc, psycopg.OperationalError):
        message = "the database is unavailable; nothing was written, retry the call"
    else:
        message = "the database reported an error; nothing was written"
    log.error("postgresql error: %s", type(exc).__name__)
    return MemhubError(ErrorKind.STORAGE, message)
