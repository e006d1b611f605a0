"""A task group that fails as a plain call would."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup

log = logging.getLogger(__name__)


@asynccontextmanager
async def task_group() -> AsyncIterator[TaskGroup]:
    """anyio's task group, except that a failure (of a task or of the body) is raised as
    itself, not wrapped in an ExceptionGroup: callers catch MemhubError and the like as
    they would from one awaited call. With several failures the first is raised and the others
    are logged (their kind only: a message may hold memory content)."""
    try:
        async with anyio.create_task_group() as tg:
            yield tg
    except BaseExceptionGroup as group:
        first, *others = group.exceptions
        if isinstance(first, Exception) and not isinstance(first, BaseExceptionGroup):
            for other in others:
                log.warning("beside %s, a task also failed: %s", type(first).__name__, type(other).__name__)
            raise first from None
        raise
