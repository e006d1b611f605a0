"""PceTx: policy versions, feedback idempotency, active contexts; items by content hash."""

from __future__ import annotations

import pytest

from memhub.core.errors import ErrorKind, MemhubError
from memhub.store.base import ActiveContextRow, ItemQuery, PolicyRow, Store
from tests.store.contract import Seed, viewer


def _policy(version: str) -> PolicyRow:
    return PolicyRow(version, "version: x", {"version": version}, "alice", None, False, ["a: 1 -> 2"], "t")


def test_policies_are_versioned_history(store: Store) -> None:
    with store.transaction(write=False) as tx:
        assert tx.current_policy() is None and tx.policy_versions() == []
    with store.transaction(write=True) as tx:
        tx.insert_policy(_policy("0.1.0"))
        tx.insert_policy(_policy("0.1.1"))
    with store.transaction(write=False) as tx:
        current = tx.current_policy()
        assert current is not None and current.version == "0.1.1" and current.diff == ["a: 1 -> 2"]
        assert tx.policy_versions() == ["0.1.0", "0.1.1"]
        first = tx.get_policy("0.1.0")
        assert first is not None and first.doc == {"version": "0.1.0"} and tx.get_policy("9.9.9") is None
    with pytest.raises(MemhubError) as raised, store.transaction(write=True) as tx:
        tx.insert_policy(_policy("0.1.0"))
    assert raised.value.kind is ErrorKind.CONFLICT


def test_feedback_once_per_claim_principal_and_bucket(store: Store, seed: Seed) -> None:
    claim = seed.item("a claim", kind="claim")
    with store.transaction(write=True) as tx:
        assert tx.add_feedback(claim.id, "alice", 7, "helpful", None) is True
        assert tx.add_feedback(claim.id, "alice", 7, "harmful", -1.0) is False
        assert tx.add_feedback(claim.id, "bob", 7, "harmful", None) is True
        assert tx.add_feedback(claim.id, "alice", 8, "helpful", 0.5) is True


def test_active_contexts_round_trip_and_purge(store: Store) -> None:
    old = ActiveContextRow("ac_old", "alice", {"claims": []}, "2025-01-01T00:00:00Z", "2025-01-01T00:30:00Z")
    new = ActiveContextRow(
        "ac_new", "alice", {"claims": [{"id": "clm_1"}]}, "2025-01-03T00:00:00Z", "2025-01-03T00:30:00Z"
    )
    with store.transaction(write=True) as tx:
        tx.insert_active_context(old, "2024-12-31T00:00:00Z")
        tx.insert_active_context(new, "2025-01-02T00:00:00Z")  # purges what expired before this
    with store.transaction(write=False) as tx:
        assert tx.get_active_context("ac_old") is None
        assert tx.get_active_context("ac_new") == new


def test_items_by_content_hash(store: Store, seed: Seed) -> None:
    a = seed.item("a", content_hash="sha256:aa")
    seed.item("b", content_hash="sha256:bb")
    with store.transaction(write=False) as tx:
        found = tx.query_items(viewer("alice"), ItemQuery(content_hash="sha256:aa"))
    assert [r.id for r in found] == [a.id]
