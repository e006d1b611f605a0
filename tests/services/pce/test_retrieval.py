"""Ranking after feedback and with age, paging, active contexts and their expiry, error codes, limits."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from tests.services.pce.conftest import PROV, Pce

pytestmark = pytest.mark.anyio


async def _ids(pce: Pce, query: str, **extra: Any) -> list[str]:
    return [i["claim"]["id"] for i in (await pce.a("pce.memory.search", query=query, **extra))["items"]]


async def _meta(pce: Pce, query: str) -> dict[str, dict[str, Any]]:
    found = await pce.a("pce.memory.search", query=query, include_meta=True)
    return {i["claim"]["id"]: {**i["scores"], "score": i["score"]} for i in found["items"]}


async def test_feedback_changes_ranking_and_is_idempotent(pce: Pce) -> None:
    a = await pce.claim("cache invalidation happens on deploy")
    b = await pce.claim("cache invalidation happens on deploy and on schema change")
    await pce.claim("deploys happen on fridays")  # a weak match: min-max gives it the 0
    await pce.settle()
    query = "cache invalidation deploy"
    start = await _ids(pce, query)
    top, other = start[0], start[1]
    assert {top, other} == {a, b}
    before = await _meta(pce, query)
    done = await pce.a("pce.memory.feedback", claim_id=top, signal="outdated")
    assert done == {"ok": True, "policy_version": "0.0.0"}
    after = await _meta(pce, query)
    assert after[top]["quality"] == pytest.approx(-0.18) and after[top]["score"] < before[top]["score"]
    for _ in range(3):  # same caller, same bucket: acknowledged, not counted again
        await pce.a("pce.memory.feedback", claim_id=top, signal="outdated")
    assert (await _meta(pce, query))[top]["quality"] == pytest.approx(-0.18)
    await pce.share_with_bob()
    await pce.b("pce.memory.feedback", claim_id=top, signal="harmful")  # bob counts separately
    await pce.a("pce.memory.feedback", claim_id=other, signal="helpful", score=0.5)
    meta = await _meta(pce, query)
    assert meta[top]["quality"] == pytest.approx(-0.426) and meta[other]["quality"] == pytest.approx(0.15)
    pce.clock.offset = timedelta(hours=2)  # the next bucket counts again
    await pce.a("pce.memory.feedback", claim_id=top, signal="harmful")
    assert (await _meta(pce, query))[top]["quality"] == pytest.approx(-0.5982)
    assert (await _ids(pce, query))[:2] == [other, top]
    for bad in ("clm_999999", "mem_1", "clm_x"):
        assert (await pce.err("pce.memory.feedback", claim_id=bad, signal="helpful"))[
            "code"
        ] == "UNKNOWN_CLAIM"


async def test_age_changes_ranking_by_kind_half_life(pce: Pce) -> None:
    task = await pce.claim("release checklist: run the migration dry run first", kind="task")
    fact = await pce.claim("release checklist mentions the migration", kind="fact")
    await pce.settle()
    now = await pce.a("pce.memory.search", query="release checklist migration dry run", include_meta=True)
    assert [i["claim"]["id"] for i in now["items"]] == [task, fact]
    pce.clock.offset = timedelta(days=60)  # task half-life 14 d, fact 120 d
    later = await pce.a("pce.memory.search", query="release checklist migration dry run", include_meta=True)
    assert [i["claim"]["id"] for i in later["items"]] == [fact, task]
    rec = {i["claim"]["id"]: i["scores"]["recency"] for i in later["items"]}
    assert rec[task] == pytest.approx(0.5 ** (60 / 14), rel=1e-3) and rec[fact] == pytest.approx(
        0.5**0.5, rel=1e-3
    )
    for item in later["items"]:
        s = item["scores"]
        assert item["score"] == pytest.approx(s["combined"] * s["g"]) and 0 <= item["score"] <= 1
        assert item["evidences"][0] == {"source_type": "git", "source_id": "abc1234", "at": PROV["at"]}


async def test_scope_ttl_excludes_expired_claims(pce: Pce) -> None:
    await pce.claim("session note: staging is frozen today", scope="session")
    await pce.claim("principle: staging changes need a ticket", scope="principle")
    await pce.settle()
    assert len(await _ids(pce, "staging")) == 2
    pce.clock.offset = timedelta(days=8)  # session ttl 7d
    assert len(await _ids(pce, "staging")) == 1
    assert len(await _ids(pce, "staging", scope=["session"])) == 0


async def test_cursor_paging_is_stable(pce: Pce) -> None:
    ids = [
        await pce.claim(f"paging note {n}: feature flags live in flags.yaml revision {n}") for n in range(7)
    ]
    await pce.settle()
    whole = await _ids(pce, "feature flags flags.yaml", top_k=50)
    assert sorted(whole) == sorted(ids)
    pages, cursor = [], None
    while True:
        args: dict[str, Any] = {"query": "feature flags flags.yaml", "top_k": 3}
        if cursor:
            args["cursor"] = cursor
        page = await pce.a("pce.memory.search", **args)
        pages.append([i["claim"]["id"] for i in page["items"]])
        if cursor is None:  # a claim written between pages does not shift them
            await pce.claim("unrelated: the office plants need water")
        if not page["has_more"]:
            assert "next_cursor" not in page
            break
        cursor = page["next_cursor"]
    assert [i for p in pages for i in p] == whole, (pages, whole)
    assert [len(p) for p in pages] == [3, 3, 1]
    other = await pce.err("pce.memory.search", query="something else", cursor=cursor or "x")
    assert other["code"] == "VALIDATION_ERROR"
    assert (await pce.err("pce.memory.search", query="q", cursor="!!!"))["code"] == "VALIDATION_ERROR"


async def test_active_context_pages_resource_and_expiry(pce: Pce) -> None:
    for n in range(5):
        await pce.claim(f"deploy rule {n}: blue green switch needs a health check")
    await pce.settle()
    first = await pce.a("pce.memory.activate", q="deploy blue green health check", top_k=2, include_meta=True)
    assert first["claims_count"] == 5 and len(first["claims"]) == 2 and first["has_more"] is True
    assert "scores" in first["claims"][0]
    ac = first["active_context_id"]
    second = await pce.a("pce.memory.activate", q="ignored when paging", top_k=2, cursor=first["next_cursor"])
    assert second["active_context_id"] == ac and len(second["claims"]) == 2
    seen = [c["claim"]["id"] for c in first["claims"] + second["claims"]]
    assert len(set(seen)) == 4
    resource = await pce.alice.read_resource(f"pce://active-context/{ac}")
    whole = json.loads(resource.contents[0].text)  # type: ignore[union-attr]
    assert [c["claim"]["id"] for c in whole["claims"]][:4] == seen and whole["expires_at"] == first[
        "expires_at"
    ]
    with pytest.raises(Exception, match="not found"):  # another caller's context does not exist for bob
        await pce.bob.read_resource(f"pce://active-context/{ac}")
    templates = await pce.alice.list_resource_templates()
    assert "pce://active-context/{id}" in [t.uri_template for t in templates.resource_templates]
    pce.clock.offset = timedelta(minutes=31)
    gone = await pce.err("pce.memory.activate", q="x", cursor=first["next_cursor"])
    assert gone["code"] == "ACTIVE_CONTEXT_EXPIRED" and gone["details"]["http"] == 410
    with pytest.raises(Exception, match="410 Gone"):
        await pce.alice.read_resource(f"pce://active-context/{ac}")


async def test_max_tokens_caps_an_active_context(pce: Pce) -> None:
    policy = (
        "version: '0.2'\nscopes:\n  project: {ttl: '30d', max_tokens: 30}\n"
        "boundary_classes:\n  public: {allow: ['*']}\n  internal: {allow: ['answer:task']}\n"
    )
    await pce.a("pce.memory.policy.apply", yaml=policy)
    for n in range(4):
        await pce.claim(f"token budget claim {n} " + "word " * 12)  # ~20 tokens each
    await pce.settle()
    ctx = await pce.a("pce.memory.activate", q="token budget claim", scope=["project"])
    assert ctx["claims_count"] == 1 and ctx["policy_version"] == "0.2.0"


async def test_error_codes_and_payload_limits(pce: Pce) -> None:
    scope = await pce.err("pce.memory.search", query="x", scope=["galaxy"])
    assert scope["code"] == "INVALID_SCOPE" and scope["details"]["http"] == 422
    missing = await pce.err("pce.memory.upsert", text="no provenance")
    assert missing["code"] == "VALIDATION_ERROR" and "provenance is required" in missing["message"]
    big = await pce.err("pce.memory.feedback", claim_id="clm_1", signal="helpful", extra="x" * 5000)
    assert big["code"] == "PAYLOAD_TOO_LARGE" and big["details"]["http"] == 413
    limits = {"pce.memory.activate": 16, "pce.memory.search": 32, "pce.memory.upsert": 64,
              "pce.memory.boundary.validate": 32, "pce.memory.policy.apply": 128}  # fmt: skip
    for tool, kb in limits.items():
        error = await pce.err(tool, pad="x" * (kb * 1024))
        assert error["code"] == "PAYLOAD_TOO_LARGE" and f"{kb * 1024} bytes" in error["message"]
    body = (await pce.alice.call_tool("pce.memory.search", {"query": 1})).content[0].text  # type: ignore[union-attr]
    error = json.loads(body)
    assert error["policy_version"] == "0.0.0" and error["request_id"] and error["trace_id"]


@pytest.mark.parametrize("pce_settings", [{"rate_limit_read": 2}])
async def test_rate_limit(pce: Pce, pce_settings: dict[str, Any]) -> None:
    await pce.a("pce.memory.search", query="x")
    await pce.a("pce.memory.search", query="x")
    error = await pce.err("pce.memory.search", query="x")
    assert (
        error["code"] == "RATE_LIMIT"
        and error["details"]["http"] == 429
        and error["details"]["retry_after_s"] >= 1
    )


async def test_project_scope_is_the_current_project(pce: Pce) -> None:
    mine = await pce.claim("project convention: snake_case module names", scope="project")
    assert await _ids(pce, "snake_case module names") == [mine]
    assert await _ids(pce, "snake_case module names", scope=["principle"]) == []
    # bob is no member of alice's project "demo": he does not see it, and cannot write there
    assert [i["claim"]["id"] for i in (await pce.b("pce.memory.search", query="snake_case"))["items"]] == []
    denied = await pce.err("pce.memory.upsert", client=pce.bob, text="bob's idea", provenance=PROV)
    assert denied["code"] == "INVALID_SCOPE" and "not found" in denied["message"]
    assert (await pce.b("pce.memory.upsert", text="bob's principle", provenance=PROV, scope="principle"))[
        "id"
    ]


async def test_a_cursor_cannot_be_moved_back_in_time(pce: Pce) -> None:
    """The cursor is not signed: its `at` may be no older than an hour (and not in the future),
    so a forged one cannot bring back claims whose TTL ran out long ago."""
    from memhub.services.pce.retrieval import decode_cursor, encode_cursor

    for n in range(4):
        await pce.claim(f"cursor note {n}: rollouts go through the canary ring {n}")
    await pce.settle()
    first = await pce.a("pce.memory.search", query="rollouts canary ring", top_k=2)
    body = decode_cursor(first["next_cursor"])
    assert await pce.a(
        "pce.memory.search", query="rollouts canary ring", top_k=2, cursor=first["next_cursor"]
    )
    for at in ("2020-01-01T00:00:00.000000Z", "2999-01-01T00:00:00.000000Z"):
        forged = encode_cursor({**body, "at": at})
        err = await pce.err("pce.memory.search", query="rollouts canary ring", top_k=2, cursor=forged)
        assert err["code"] == "VALIDATION_ERROR" and "expired" in err["message"]
