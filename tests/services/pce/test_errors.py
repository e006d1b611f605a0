"""Seed 000's error envelope: codes by class or kind, HTTP statuses, the tool's own failure codes."""

from __future__ import annotations

import pytest

from memhub.core.errors import CallContext, ErrorKind, MemhubError, Unauthorized
from memhub.services.pce import errors


def test_error_codes_and_http_status() -> None:
    ctx = CallContext("pce.memory.upsert", "pce", "r1", "t1", "0.1.0")
    storage = errors.render(MemhubError(ErrorKind.STORAGE, "disk full"), ctx)
    assert storage["error"]["code"] == "UPSERT_FAILED" and storage["error"]["details"]["http"] == 500
    assert (
        storage["request_id"] == "r1" and storage["trace_id"] == "t1" and storage["policy_version"] == "0.1.0"
    )
    internal = errors.render(MemhubError(ErrorKind.INTERNAL, "bug"), ctx)
    assert internal["error"]["code"] == "INTERNAL"
    failed = {"pce.memory.activate": "ACTIVATE_FAILED", "pce.memory.feedback": "FEEDBACK_FAILED",
              "pce.memory.boundary.validate": "BOUNDARY_ERROR", "pce.memory.search": "INTERNAL"}  # fmt: skip
    for tool, code in failed.items():
        body = errors.render(MemhubError(ErrorKind.TIMEOUT, "slow"), CallContext(tool, "pce", "r", "t"))
        assert body["error"]["code"] == code and body["error"]["details"]["reason"] == "timeout"
        assert body["policy_version"] == "0.0.0"
    unauthorized = errors.render(Unauthorized("no key"), ctx)
    assert unauthorized["error"]["details"] == {"http": 401}


def test_a_caller_without_a_key_is_unauthorized() -> None:
    from types import SimpleNamespace

    from memhub.auth.identity import Identity
    from memhub.core.models import Principal

    with pytest.raises(MemhubError) as raised:
        Identity(Principal("local"), require_key=True)(SimpleNamespace(state=SimpleNamespace()))
    body = errors.render(raised.value, CallContext("pce.memory.search", "pce", "", ""))
    assert body["error"]["code"] == "UNAUTHORIZED" and body["error"]["details"]["http"] == 401
