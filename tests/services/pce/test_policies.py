"""pce.memory.policy.apply: the §2.6 example, history, concurrency, signatures, fail-closed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memhub.services.pce.policies import sign
from tests.helpers import SHARED
from tests.services.pce.conftest import Pce
from tests.store.backends import rows

pytestmark = pytest.mark.anyio

SEED_26 = json.loads(
    (SHARED / "seeds" / "000_83c6bdc56f1ec8a5.txt")
    .read_text(encoding="utf-8")
    .split("**Example (apply policy with retrieval params)**")[1]
    .split("```json")[1]
    .split("```")[0]
)["yaml"]


def _history(pce: Pce) -> list[tuple[str, str, str]]:
    return [
        (r[0], r[1], r[2])
        for r in rows(
            pce.container.settings.db_url, "SELECT version, author, diff FROM pce_policies ORDER BY id"
        )
    ]


async def test_seed_policy_applies_and_changes_ranking(pce: Pce) -> None:
    a = await pce.claim("retry budget for the webhook consumer is three attempts", kind="fact")
    b = await pce.claim("webhook consumer retry budget: five attempts with jitter", kind="fact")
    await pce.settle()
    for _ in range(1):
        await pce.a("pce.memory.feedback", claim_id=a, signal="harmful")
    before = await pce.a("pce.memory.search", query="webhook retry budget", include_meta=True)
    assert [i["claim"]["id"] for i in before["items"]][:2] == [b, a]  # harmful a sinks (use_quality)
    assert before["policy_version"] == "0.0.0"

    applied = await pce.call(pce.alice, "pce.memory.policy.apply", yaml=SEED_26, expected_version="0.0.0")
    assert applied["data"] == {"version": "0.1.0"} and applied["policy_version"] == "0.1.0"
    after = await pce.a("pce.memory.search", query="webhook retry budget", include_meta=True)
    assert after["policy_version"] == "0.1.0"
    quality_off = {i["claim"]["id"]: i["scores"] for i in after["items"]}
    assert all(s["g"] == pytest.approx(s["recency"]) for s in quality_off.values())  # use_quality: false
    assert [i["claim"]["id"] for i in after["items"]] != [i["claim"]["id"] for i in before["items"]]
    ctx = await pce.a("pce.memory.activate", q="webhook retry budget")
    assert ctx["scoring_params"] == {
        "alpha": 0.65, "k_txt": 48, "k_vec": 96, "k_final": 12,
        "rerank": {"use_quality": False, "recency_half_life_days": 30.0},
    }  # fmt: skip
    history = await pce.container.runtime.in_thread(lambda: _history(pce))
    assert [(v, who) for v, who, _ in history] == [("0.1.0", "alice")]
    assert "retrieval.hybrid.alpha: 0.5 -> 0.65" in json.loads(history[0][2])
    again = await pce.a("pce.memory.policy.apply", yaml=SEED_26)
    assert again == {"version": "0.1.1"}
    record = json.loads((await pce.bob.read_resource("pce://policy/0.1.0")).contents[0].text)  # type: ignore[union-attr]
    assert record["author"] == "alice" and record["yaml"] == SEED_26 and record["signed"] is False
    assert (
        "retrieval.hybrid.alpha: 0.5 -> 0.65" in record["diff"]
        and record["doc"]["retrieval"]["hybrid"]["k_final"] == 12
    )
    current = json.loads((await pce.alice.read_resource("pce://policy/current")).contents[0].text)  # type: ignore[union-attr]
    assert current["version"] == "0.1.1"


async def test_dry_run_validate_only_and_version_conflicts(pce: Pce) -> None:
    assert await pce.a("pce.memory.policy.apply", yaml=SEED_26, validate_only=True) == {"version": "0.1.0"}
    assert await pce.a("pce.memory.policy.apply", yaml=SEED_26, dry_run=True) == {"version": "0.1.0"}
    assert await pce.container.runtime.in_thread(lambda: _history(pce)) == []
    await pce.a("pce.memory.policy.apply", yaml=SEED_26, expected_version="0.0.0")
    stale = await pce.err("pce.memory.policy.apply", yaml=SEED_26, expected_version="0.0.0")
    assert stale["code"] == "DUPLICATE" and stale["details"] == {
        "http": 409, "reason": "version_conflict", "current_version": "0.1.0", "expected_version": "0.0.0",
    }  # fmt: skip
    pinned = SEED_26.replace("version: 0.1", "version: '0.1.0'")
    reused = await pce.err("pce.memory.policy.apply", yaml=pinned)
    assert reused["code"] == "DUPLICATE" and reused["details"]["reason"] == "version_reused"


@pytest.mark.parametrize(
    ("yaml_text", "needle"),
    [
        ("version: 0.1\nscopes: {}\nboundary_classes: {}\nretrieval: {hybrid: {alpha: 2}}", "alpha"),
        ("version: 0.1\nscopes: {}\nboundary_classes: {secret: {allow: ['*']}}", "secret is never released"),
        ("version: 0.1\nscopes: {galaxy: {ttl: 1d}}\nboundary_classes: {}", "scopes.galaxy"),
        ("version: 0.1\nscopes: {session: {ttl: soon}}\nboundary_classes: {}", "ttl"),
        ("version: 0.1\nscopes: {}\nboundary_classes: {}\nextra: 1", "unknown key"),
        ("!!python/object/apply:os.system ['echo pwned']", "tags"),
        ("a: &x [1]\nb: *x", "anchors"),
        ("version: [unclosed", "not valid YAML"),
        ("- just\n- a list", "mapping"),
    ],
)
async def test_invalid_policies_change_nothing(pce: Pce, yaml_text: str, needle: str) -> None:
    error = await pce.err("pce.memory.policy.apply", yaml=yaml_text)
    assert error["code"] == "INVALID_POLICY" and error["details"]["alias"] == "POLICY_INVALID", error
    assert needle in error["message"]
    assert (await pce.a("pce.memory.search", query="anything"))["policy_version"] == "0.0.0"


async def test_only_admins_apply(pce: Pce) -> None:
    error = await pce.err("pce.memory.policy.apply", client=pce.bob, yaml=SEED_26)
    assert error["code"] == "UNAUTHORIZED" and error["details"]["http"] == 401
    assert await pce.b("pce.memory.policy.apply", yaml=SEED_26, validate_only=True) == {"version": "0.1.0"}


@pytest.mark.parametrize("pce_settings", [{"pce_policy_hmac_key": "k3y"}])
async def test_signed_policies_required_when_a_key_is_set(pce: Pce, pce_settings: dict[str, Any]) -> None:
    unsigned = await pce.err("pce.memory.policy.apply", yaml=SEED_26)
    assert unsigned["code"] == "UNAUTHORIZED"
    forged = await pce.err(
        "pce.memory.policy.apply",
        yaml=SEED_26,
        approver="carol",
        signature=sign("x", "carol", SEED_26, "0.0.0"),
    )
    assert forged["code"] == "UNAUTHORIZED" and "does not verify" in forged["message"]
    other = await pce.err(
        "pce.memory.policy.apply",
        yaml=SEED_26,
        approver="mallory",
        signature=sign("k3y", "carol", SEED_26, "0.0.0"),
    )
    assert other["code"] == "UNAUTHORIZED"
    assert await pce.container.runtime.in_thread(lambda: _history(pce)) == []
    ok = await pce.a(
        "pce.memory.policy.apply",
        yaml=SEED_26,
        approver="carol",
        signature=sign("k3y", "carol", SEED_26, "0.0.0"),
    )
    assert ok == {"version": "0.1.0"}
    replayed = await pce.err(  # the same signed policy again, over the version it put in force
        "pce.memory.policy.apply",
        yaml=SEED_26,
        approver="carol",
        signature=sign("k3y", "carol", SEED_26, "0.0.0"),
    )
    assert replayed["code"] == "UNAUTHORIZED"


@pytest.mark.parametrize("pce_settings", [{"pce_require_policy": True}])
async def test_policy_missing_when_required(pce: Pce, pce_settings: dict[str, Any]) -> None:
    error = await pce.err("pce.memory.activate", q="anything")
    assert error["code"] == "POLICY_MISSING" and error["details"]["http"] == 424
    await pce.a("pce.memory.policy.apply", yaml=SEED_26)
    assert (await pce.a("pce.memory.activate", q="anything"))["policy_version"] == "0.1.0"


async def test_largest_candidate_counts_are_served(pce: Pce) -> None:
    big = "version: '0.3'\nscopes: {}\nboundary_classes: {public: {allow: ['*']}}\n"
    big += "retrieval: {hybrid: {alpha: 1.0, k_txt: 1000, k_vec: 1000, k_final: 1000}}\n"
    await pce.a("pce.memory.policy.apply", yaml=big)
    claim = await pce.claim("a public claim", boundary_class="public")
    await pce.settle()
    assert [i["claim"]["id"] for i in (await pce.a("pce.memory.search", query="public claim"))["items"]] == [
        claim
    ]
