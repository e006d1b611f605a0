"""Boundary-first: secret never leaves by any tool of any toolset; pii redacted or withheld."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from tests.services.pce.conftest import AT, PROV, Pce

pytestmark = pytest.mark.anyio

TOKEN = "zebracrown"  # a word only the secret claim holds
SECRET_TEXT = f"{TOKEN} deploy key AKIAIOSFODNN7EXAMPLE for the billing bucket"


async def _everything(client: Client, calls: list[tuple[str, dict[str, Any]]]) -> str:
    out = []
    for tool, args in calls:
        result = await client.call_tool(tool, args)
        out.append(json.dumps(result.model_dump(mode="json"), ensure_ascii=False))
    return "\n".join(out)


async def test_secret_claim_never_returned_by_any_tool(pce: Pce) -> None:
    secret = await pce.claim(SECRET_TEXT, boundary_class="secret", scope="project")
    public = await pce.claim(f"{TOKEN} public note about billing", boundary_class="public", scope="project")
    await pce.settle()
    secret_num = secret.removeprefix("clm_")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("pce.memory.search", {"query": TOKEN, "include_meta": True}),
        ("pce.memory.search", {"query": TOKEN, "allow": ["tool:contact-lookup", "answer:task"]}),
        ("pce.memory.activate", {"q": f"{TOKEN} deploy key", "include_meta": True}),
        ("pce.memory.feedback", {"claim_id": secret, "signal": "helpful"}),
        ("memory", {"action": "search", "query": TOKEN}),
        ("memory", {"action": "get", "memory_id": f"mem_{secret_num}"}),
        ("memory", {"action": "get_related", "memory_id": f"mem_{secret_num}"}),
        ("search", {"type": "semantic", "query": f"{TOKEN} deploy key"}),
        ("search", {"type": "advanced"}),
        ("search", {"type": "timerange", "start_time": "2000-01-01T00:00:00Z"}),
        ("memory_manage", {"action": "export", "export_format": "json"}),
        ("memory_manage", {"action": "stats"}),
        ("visualize", {"format": "json"}),
        ("admin", {"action": "health"}),
        ("search-decisions", {"project_id": 1, "keyword": TOKEN}),
        ("search-topics", {"project_id": 1, "keyword": TOKEN}),
    ]
    seen = await _everything(pce.alice, calls) + await _everything(pce.bob, calls)
    assert "AKIAIOSFODNN7EXAMPLE" not in seen and "billing bucket" not in seen
    search = await pce.a("pce.memory.search", query=TOKEN)
    assert [i["claim"]["id"] for i in search["items"]] == [public]
    error = await pce.err("pce.memory.feedback", claim_id=secret, signal="helpful")
    assert error["code"] == "UNKNOWN_CLAIM"
    # nor do the audit log or the server's metrics carry it
    events = await pce.container.runtime.in_thread(lambda: list(pce.container.runtime.store.iter_events()))
    assert events and TOKEN not in json.dumps([e.detail for e in events], ensure_ascii=False)


async def test_upsert_refuses_content_above_its_class(pce: Pce) -> None:
    error = await pce.err("pce.memory.upsert", text=SECRET_TEXT, provenance=PROV, boundary_class="internal")
    assert error["code"] == "INVALID_BOUNDARY" and error["details"]["found"] == ["aws_access_key"]
    assert "AKIA" not in json.dumps(error)
    pii = await pce.err(
        "pce.memory.upsert", text="担当: sato@example.co.jp", provenance=PROV, boundary_class="public"
    )
    assert pii["code"] == "INVALID_BOUNDARY" and pii["details"]["needed"] == "pii"
    entity = await pce.err(
        "pce.memory.upsert", text="the on-call contact", provenance=PROV,
        entities=[{"id": "p1", "type": "Actor", "name": "Sato", "canonical_key": "sato@example.co.jp"}],
    )  # fmt: skip
    assert entity["code"] == "INVALID_BOUNDARY"
    bad = await pce.err("pce.memory.upsert", text="x", provenance=PROV, boundary_class="top-secret")
    assert bad["code"] == "INVALID_BOUNDARY" and bad["details"]["http"] == 422


async def test_pii_redacted_for_allowed_callers_and_withheld_with_escalation(pce: Pce) -> None:
    ja = await pce.claim(
        "顧客窓口の山田さん: yamada.taro@example.co.jp / 090-1234-5678（注文番号 ORD-2024-0315）",
        boundary_class="pii",
    )
    en = await pce.claim(
        "Support lead Jane: jane.doe@example.com, +1 415 555 2671, since v2.3.1", boundary_class="pii"
    )
    await pce.settle()
    allowed = await pce.a("pce.memory.search", query="顧客窓口 support lead", allow=["tool:contact-lookup"])
    texts = {i["claim"]["id"]: i["claim"]["text"] for i in allowed["items"]}
    assert texts[ja] == "顧客窓口の山田さん: [REDACTED:email] / [REDACTED:phone]（注文番号 ORD-2024-0315）"
    assert texts[en] == "Support lead Jane: [REDACTED:email], [REDACTED:phone], since v2.3.1"
    # answer:task may not see pii: the claims are withheld and the escalation audited
    plain = await pce.a("pce.memory.search", query="顧客窓口 support lead")
    assert plain["items"] == []
    await pce.container.runtime.in_thread(pce.container.runtime.deferred.flush)
    events = await pce.container.runtime.in_thread(lambda: list(pce.container.runtime.store.iter_events()))
    searches = [e.detail["boundary"] for e in events if e.tool == "pce.memory.search"]
    assert searches[-1]["escalation"] == "human_review" and sorted(searches[-1]["escalated_ids"]) == sorted(
        [ja, en]
    )
    assert searches[0]["returned_classes"] == ["pii"] and searches[0]["classes"] == [
        "internal",
        "pii",
        "public",
    ]


async def test_wildcard_allow_is_boundary_denied(pce: Pce) -> None:
    for tool, args in (("pce.memory.search", {"query": "x"}), ("pce.memory.activate", {"q": "x"}),
                       ("pce.memory.boundary.validate", {"payload": "x"})):  # fmt: skip
        error = await pce.err(tool, **args, allow=["*"])
        assert error["code"] == "BOUNDARY_DENIED" and error["details"]["http"] == 403


SAFE = [
    "version 1.2.3 released 2024-03-15 (see 3.2.1-4)",
    "order ORD-03-1234-5678 shipped; invoice INV-090-1234-5678",
    "build 20240115123456 at 12:30:45, IP 192.168.0.1:8080",
    "uuid 123e4567-e89b-12d3-a456-426614174000, ISBN 978-4-06-519981-7",
    "金額 1,234,567円、日付 2025/01/02、内線 1234-5678",
    "git@github.com:org/repo.git sha256:" + "a" * 64,
]
PII = {
    "連絡先: yamada.taro@example.co.jp まで": "連絡先: [REDACTED:email] まで",
    "携帯 090-1234-5678、本社 03-1234-5678": "携帯 [REDACTED:phone]、本社 [REDACTED:phone]",
    "電話 09012345678 または (03) 1234-5678": "電話 [REDACTED:phone] または [REDACTED:phone]",
    "国際 +81 90 1234 5678 / +81-3-1234-5678": "国際 [REDACTED:phone] / [REDACTED:phone]",
    "Call +1 415 555 2671 or +442071838750.": "Call [REDACTED:phone] or [REDACTED:phone].",
    "Mail ops-team+alerts@corp.example.com today": "Mail [REDACTED:email] today",
}
SECRETS = {
    "key AKIAIOSFODNN7EXAMPLE": "key [REDACTED:aws_access_key]",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY":
        "aws_secret_access_key = [REDACTED:aws_secret_key]",
    "GITHUB_TOKEN=ghp_1234567890abcdefghijklmnopqrstuvwxyzAB": "GITHUB_TOKEN=[REDACTED:github_token]",
    "OPENAI_API_KEY: sk-proj-abcdefghijklmnopqrstuvwxyz123456": "OPENAI_API_KEY: [REDACTED:openai_key]",
    "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc": "stripe [REDACTED:stripe_key]",
    "slack xoxb-123456789012-abcdefghijkl": "slack [REDACTED:slack_token]",
    "google AIzaSyA1234567890abcdefghijklmnopqrstuv": "google [REDACTED:google_api_key]",
    "Authorization: Bearer abcdef1234567890abcdef": "Authorization: Bearer [REDACTED:bearer_token]",
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U":
        "jwt [REDACTED:jwt]",
    "DATABASE_URL=postgres://admin:s3cr3tP4ss@db.internal:5432/app":
        "DATABASE_URL=postgres://admin:[REDACTED:url_password]@db.internal:5432/app",
    "password: hunter2hunter2": "password: [REDACTED:password]",
    "DBのパスワード: Himitsu123 です": "DBのパスワード: [REDACTED:password] です",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----":
        "[REDACTED:private_key]",
}  # fmt: skip


async def test_boundary_validate_redacts_before_send(pce: Pce) -> None:
    for text in SAFE:
        data = await pce.a("pce.memory.boundary.validate", payload=text)
        assert data["allowed"] is True and data["redacted"] == text, text
    for text, safe in PII.items():
        denied = await pce.a(
            "pce.memory.boundary.validate", payload=text, allow=["answer:task"], scope="project"
        )
        assert denied["allowed"] is False and "pii" in denied["reason"] and denied["redacted"] == safe, text
        allowed = await pce.a("pce.memory.boundary.validate", payload=text, allow=["tool:contact-lookup"])
        assert allowed["allowed"] is True and allowed["redacted"] == safe, text
    for text, safe in SECRETS.items():
        data = await pce.a(
            "pce.memory.boundary.validate", payload=text, allow=["tool:contact-lookup", "answer:task"]
        )
        assert data["allowed"] is False and "secret" in data["reason"] and data["redacted"] == safe, text
    bad = await pce.err("pce.memory.boundary.validate", payload="x", scope="global")
    assert bad["code"] == "INVALID_SCOPE" and bad["details"]["http"] == 422


async def test_claims_and_memories_stay_in_their_toolsets(pce: Pce) -> None:
    """Decided in docs/pce.md: pce searches claims only, assoc's memory tools memories only."""
    claim = await pce.claim("quokka rotation policy for the build cache", boundary_class="public")
    stored = await pce.alice.call_tool(
        "memory", {"action": "store", "content": "quokka memory about the build cache", "domain": "user"}
    )
    assert not stored.is_error
    await pce.settle()
    found = await pce.a("pce.memory.search", query="quokka build cache")
    assert [i["claim"]["id"] for i in found["items"]] == [claim]
    memories = await pce.alice.call_tool("memory", {"action": "search", "query": "quokka build cache"})
    text = json.dumps(memories.structured_content, ensure_ascii=False)
    assert "quokka memory" in text and "rotation policy" not in text


async def test_provenance_shares_the_claims_boundary_class(pce: Pce) -> None:
    leaky = {"at": AT, "actor": "sato@example.co.jp", "note": "call 090-1234-5678"}
    err = await pce.err(
        "pce.memory.upsert", text="The build uses uv", kind="fact", scope="project", boundary_class="public",
        provenance=leaky,
    )  # fmt: skip
    assert err["code"] == "INVALID_BOUNDARY"


async def test_an_upsert_never_confirms_another_members_secret_claim(pce: Pce) -> None:
    text = "The staging database password rotates on Fridays"
    secret = await pce.claim(text, kind="fact", scope="project", boundary_class="secret")
    await pce.share_with_bob()
    guessed = await pce.b(
        "pce.memory.upsert", text=text, kind="fact", scope="project", boundary_class="secret", provenance=PROV
    )
    assert guessed["id"] != secret  # bob gets a claim of his own, not alice's id or a DUPLICATE
    again = await pce.claim(text, kind="fact", scope="project", boundary_class="secret")
    assert again == secret  # alice's own repeat is still idempotent
