"""Secrets and pii written the ordinary Japanese (and North American) way (issue 18, item 1):
`boundary.validate` flags them, `upsert` never stores them as public (nor internal), and a
project viewer only ever receives them redacted, also from claims stored as public before the
detectors found them (the pce output filter masks secrets, retrieval masks pii)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memhub.core.models import Kind, Principal, ProjectRole
from memhub.services.pce.claims import all_classes, claim_hash
from memhub.store.base import ItemQuery, NewItem
from tests.services.pce.conftest import PROV, Pce

pytestmark = pytest.mark.anyio

AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GHP = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
SK = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"
# the issue's examples: text -> (the class it needs, the text with every finding masked)
SECRETS = {
    f"本番のキーは{AWS_ID}です": "本番のキーは[REDACTED:aws_access_key]です",
    f"トークン{GHP}を使う": "トークン[REDACTED:github_token]を使う",
    f"鍵は{SK}です": "鍵は[REDACTED:openai_key]です",
    f"aws key {AWS_ID} secret {AWS_SECRET}": (
        "aws key [REDACTED:aws_access_key] secret [REDACTED:aws_secret_key]"
    ),
}
PII = {
    "メールはtaro@example.co.jpまで": "メールは[REDACTED:email]まで",
    "taro＠example.co.jp": "[REDACTED:email]",
    "090 1234 5678": "[REDACTED:phone]",
    "０９０－１２３４－５６７８": "[REDACTED:phone]",
    "090ー1234ー5678": "[REDACTED:phone]",
    "(090) 1234-5678": "[REDACTED:phone]",
    "携帯(090)1234-5678": "携帯[REDACTED:phone]",
    "TEL090-1234-5678です": "TEL[REDACTED:phone]です",
    "電話:09012345678です": "電話:[REDACTED:phone]です",
    "(415) 555-0100": "[REDACTED:phone]",
    "415-555-0100": "[REDACTED:phone]",
}
RAW = [
    AWS_ID,
    AWS_SECRET,
    GHP,
    SK,
    "taro",
    "1234 5678",
    "1234-5678",
    "1234ー5678",
    "５６７８",
    "555-0100",
    "09012345678",
]
NOTE = "contact note "  # a word every claim shares, to find them all with one query


def _clean(text: str) -> None:
    for raw in RAW:
        assert raw not in text, (raw, text)


async def _viewer_bob(pce: Pce) -> None:
    def work() -> None:
        with pce.container.runtime.store.transaction(write=True) as tx:
            project = tx.get_project_by_name("demo")
            assert project is not None
            tx.ensure_principal("bob")
            tx.set_member(project.id, "bob", ProjectRole.VIEWER)

    await pce.container.runtime.in_thread(work)


async def test_boundary_validate_flags_the_issues_examples(pce: Pce) -> None:
    for examples, needed in ((SECRETS, "secret"), (PII, "pii")):
        for text, masked in examples.items():
            denied = await pce.a("pce.memory.boundary.validate", payload=text)
            assert denied["allowed"] is False and needed in denied["reason"], text
            assert denied["redacted"] == masked
            allowed = await pce.a("pce.memory.boundary.validate", payload=text, allow=["tool:contact-lookup"])
            assert allowed["allowed"] is (needed == "pii") and allowed["redacted"] == masked


async def test_upsert_never_stores_them_public_and_a_viewer_gets_them_redacted(pce: Pce) -> None:
    await pce.claim(NOTE + "index", scope="project")  # alice's project "demo" exists
    for examples, needed in ((SECRETS, "secret"), (PII, "pii")):
        for text in examples:
            for declared in ("public", "internal"):
                error = await pce.err(
                    "pce.memory.upsert",
                    text=NOTE + text,
                    provenance=PROV,
                    scope="project",
                    boundary_class=declared,
                )
                assert error["code"] == "INVALID_BOUNDARY" and error["details"]["needed"] == needed, text
                _clean(json.dumps(error, ensure_ascii=False))
            await pce.claim(NOTE + text, scope="project", boundary_class=needed)
    await pce.settle()

    def classes() -> dict[str, str]:
        with pce.container.runtime.store.transaction(write=False) as tx:
            rows = tx.query_items(
                all_classes(tx, Principal(id="alice")), ItemQuery(kinds=(Kind.CLAIM,), limit=100)
            )
        return {row.body: row.boundary_class for row in rows}

    stored = await pce.container.runtime.in_thread(classes)
    assert all(stored[NOTE + t] == "secret" for t in SECRETS) and all(stored[NOTE + t] == "pii" for t in PII)
    await _viewer_bob(pce)
    found = await pce.b("pce.memory.search", query="contact note", allow=["tool:contact-lookup"], top_k=50)
    texts = sorted(i["claim"]["text"] for i in found["items"])
    assert texts == sorted([NOTE + "index", *(NOTE + masked for masked in PII.values())])
    activated = await pce.b("pce.memory.activate", q="contact note", allow=["tool:contact-lookup"], top_k=50)
    assert sorted(c["claim"]["text"] for c in activated["claims"]) == texts
    _clean(json.dumps([found, activated], ensure_ascii=False))


async def test_claims_stored_public_before_the_fix_are_served_redacted(pce: Pce) -> None:
    """Rows a store may hold from before the detectors found them: a viewer's search gets them
    masked (pii by retrieval, secrets by the pce output filter)."""
    await pce.claim(NOTE + "index", scope="project")
    examples = {**SECRETS, **PII}

    def legacy() -> None:
        with pce.container.runtime.store.transaction(write=True) as tx:
            project = tx.get_project_by_name("demo")
            assert project is not None
            for text in examples:
                tx.insert_item(
                    NewItem(
                        kind=Kind.CLAIM, owner="alice", scope="project", project_id=project.id,
                        body=NOTE + text,
                        boundary_class="public", category="fact", content_hash=claim_hash(NOTE + text),
                        attrs={"pce_scope": "project", "provenance": PROV, "relations": [], "via": "test"},
                    )
                )  # fmt: skip

    await pce.container.runtime.in_thread(legacy)
    await pce.settle()
    await _viewer_bob(pce)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("pce.memory.search", {"query": "contact note", "top_k": 50, "include_meta": True}),
        ("pce.memory.search", {"query": "contact note", "top_k": 50, "allow": ["tool:contact-lookup"]}),
        ("pce.memory.activate", {"q": "contact note", "top_k": 50, "include_meta": True}),
    ]
    for tool, args in calls:
        data = await pce.b(tool, **args)
        items = data["items"] if tool == "pce.memory.search" else data["claims"]
        texts = sorted(i["claim"]["text"] for i in items)
        assert texts == sorted([NOTE + "index", *(NOTE + masked for masked in examples.values())]), tool
        _clean(json.dumps(data, ensure_ascii=False))
    # the active context read back as an MCP resource (resources pass no tool output filter)
    resource = await pce.bob.read_resource(f"pce://active-context/{data['active_context_id']}")
    body = json.loads(resource.contents[0].text)  # type: ignore[union-attr]
    texts = sorted(c["claim"]["text"] for c in body["claims"])
    assert texts == sorted([NOTE + "index", *(NOTE + masked for masked in examples.values())])
    _clean(json.dumps(body, ensure_ascii=False))
