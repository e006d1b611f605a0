"""Feedback is a write (a project viewer may not rate the owner's claim), and a claim that
matched neither the text nor the vector side is never retrieved (issue 18, items 10 and 19)."""

from __future__ import annotations

from typing import Any

import pytest

from memhub.core.models import ProjectRole
from tests.services.pce.conftest import Pce

pytestmark = pytest.mark.anyio


async def _member(pce: Pce, role: ProjectRole) -> None:
    """Make bob a member of alice's current project "demo" with `role`."""

    def work() -> None:
        with pce.container.runtime.store.transaction(write=True) as tx:
            project = tx.get_project_by_name("demo")
            assert project is not None
            tx.ensure_principal("bob")
            tx.set_member(project.id, "bob", role)

    await pce.container.runtime.in_thread(work)


async def _quality(pce: Pce, query: str, claim: str) -> float:
    found = await pce.a("pce.memory.search", query=query, include_meta=True)
    return float({i["claim"]["id"]: i["scores"]["quality"] for i in found["items"]}[claim])


async def test_a_project_viewer_may_not_rate_the_owners_claim(pce: Pce) -> None:
    claim = await pce.claim("the nightly build publishes wheels to the mirror", scope="project")
    await pce.settle()
    await _member(pce, ProjectRole.VIEWER)
    seen = await pce.b("pce.memory.search", query="nightly build wheels")
    assert [i["claim"]["id"] for i in seen["items"]] == [claim]  # bob may read it
    for signal in ("harmful", "outdated", "duplicate", "helpful"):
        error = await pce.err("pce.memory.feedback", pce.bob, claim_id=claim, signal=signal)
        assert error["code"] == "BOUNDARY_DENIED" and error["details"]["http"] == 403
        assert "write access" in error["message"]
    assert await _quality(pce, "nightly build wheels", claim) == 0.0  # unchanged
    # an editor may (and the owner still may)
    await _member(pce, ProjectRole.EDITOR)
    await pce.b("pce.memory.feedback", claim_id=claim, signal="harmful")
    assert await _quality(pce, "nightly build wheels", claim) == pytest.approx(-0.3)
    await pce.a("pce.memory.feedback", claim_id=claim, signal="helpful")
    assert await _quality(pce, "nightly build wheels", claim) == pytest.approx(0.09)


async def _retrieved(pce: Pce, tool: str, **args: Any) -> list[dict[str, Any]]:
    data = await pce.a(tool, include_meta=True, **args)
    return list(data["items"] if tool == "pce.memory.search" else data["claims"])


async def test_claims_without_relevance_are_not_retrieved(pce: Pce) -> None:
    match = await pce.claim("the payment webhook retries three times with backoff")
    unrelated = [
        await pce.claim("lunch is served at noon in the cafeteria"),
        await pce.claim("猫は窓辺で昼寝をする"),
        await pce.claim("quarterly offsite planning happens in march"),
    ]
    await pce.settle()
    for tool, args in (
        ("pce.memory.search", {"query": "payment webhook retries"}),
        ("pce.memory.activate", {"q": "payment webhook retries"}),
    ):
        items = await _retrieved(pce, tool, **args)
        ids = [i["claim"]["id"] for i in items]
        assert match in ids and not set(ids) & set(unrelated), (tool, items)
        for item in items:
            assert item["score"] > 0 and item["scores"]["combined"] > 0, item
            assert "neither side" not in item["reason"]
    # a query nothing matches retrieves nothing (and activates an empty context)
    nothing = (("pce.memory.search", {"query": "zyxwvut"}), ("pce.memory.activate", {"q": "zyxwvut"}))
    for tool, args in nothing:
        assert await _retrieved(pce, tool, **args) == [], tool
