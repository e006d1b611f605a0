"""Readiness, as a load balancer asks it (`GET /ready`): may this replica take traffic?

Ready when the store answers a query within `READY_TIMEOUT_S` and its schema holds every
migration this memhub ships (`schema_version` at least the newest one known): a replica of a
newer memhub started against a database an older one still uses is not ready until the
migrations have run (they run when a store opens). Nothing else is checked: a model still
loading is not a reason to refuse calls (text search answers meanwhile); `/health` says
whether the process is alive at all.
"""

from __future__ import annotations

from typing import Any

import anyio

from memhub.core.errors import MemhubError
from memhub.services.runtime import Runtime
from memhub.store.versions import known_schema_version

READY_TIMEOUT_S = 3.0


async def readiness(runtime: Runtime) -> tuple[bool, dict[str, Any]]:
    """(ready, what was checked)."""
    store = runtime.store
    expected = known_schema_version(store.backend)
    version: int | None = None
    reason = ""
    with anyio.move_on_after(READY_TIMEOUT_S):
        try:
            version = await anyio.to_thread.run_sync(store.schema_version, abandon_on_cancel=True)
        except MemhubError as exc:
            reason = exc.message
    if version is None:
        reason = reason or f"the store did not answer within {READY_TIMEOUT_S:g} s"
        return False, {"store": "unreachable", "reason": reason, "schema_expected": expected}
    body: dict[str, Any] = {"store": "ok", "schema_version": version, "schema_expected": expected}
    if version < expected:
        body["reason"] = "the store's schema is older than this memhub's; its migrations have not run"
        return False, body
    return True, body
