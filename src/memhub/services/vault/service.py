"""How a vault tool call runs: check the caller, do the file work off the event loop, then
bring the store index up to date in one transaction together with the call's audit event.

`call.detail` holds the fields seed 001 §6 asks to log (paths, counts, flags; never note
text); they go to the audit log and, at INFO, to stderr.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TypeVar

from memhub.core.errors import ErrorKind, MemhubError
from memhub.services.runtime import Call
from memhub.services.vault.index import Changes
from memhub.services.vault.state import VaultState

log = logging.getLogger("memhub.vault")
T = TypeVar("T")


def vault_state(call: Call) -> VaultState:
    state = call.state
    if not isinstance(state, VaultState):
        raise MemhubError(ErrorKind.UNAVAILABLE, "no vault is configured (start memhub with --vault PATH)")
    state.vault.check_owner(call.principal.id)
    return state


async def run(call: Call, work: Callable[[VaultState], T], *, writes: bool = False) -> T:
    """`work(state)` on a worker thread, then the index sync and the audit event in one transaction.
    `writes`: the note `work` wrote (its `call.detail["path"]`) is indexed now, whatever the interval."""
    state = vault_state(call)

    def guarded(state: VaultState) -> T:
        if writes:
            call.check_deadline()  # a file write cannot be rolled back: not past the limit
        return work(state)

    result = await call.runtime.in_thread(lambda: guarded(state))
    written = call.detail.get("path") if writes else None
    force = {str(written)} if written else None
    if force:
        state.invalidate()  # the client sees its own write at once
    changes: Changes = await call.runtime.in_thread(
        lambda: state.index.scan(state.vault, state.cache, state.listing(), force=force)
    )
    try:
        await call.transact(lambda tx: state.index.apply(tx, state.vault, changes))
    except MemhubError:
        state.index.rolled_back()
        raise
    state.index.committed(changes)
    log.info("%s %s", call.tool, json.dumps(call.detail, ensure_ascii=False))
    return result
