"""A task group that fails as a plain call would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup


@asynccontextmanager
async def task_group() -> AsyncIterator[TaskGroup]:
    """anyio's task group, except that a failure (of a task or of the body) is raised as
    itself, not wrapped in an ExceptionGroup: callers catch MemhubError and the like as
    they would from one awaited call. With several failures the first is raised."""
    try:
        async with anyio.create_task_group() as tg:
            yield tg
    except BaseExceptionGroup as group:
        first = group.exceptions[0]
        if isinstance(first, Exception) and not isinstance(first, BaseExceptionGroup):
            raise first from None
        raise
