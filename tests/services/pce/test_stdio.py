"""The pce toolset over stdio: a real `memhub serve` subprocess, the seed's sample flow (§5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import error_body, stdio_params
from tests.services.pce.conftest import PROV
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


async def _data(client: Client, tool: str, **arguments: object) -> dict[str, object]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    body = result.structured_content
    assert isinstance(body, dict) and set(body) == {"data", "policy_version", "request_id", "trace_id"}
    data = body["data"]
    assert isinstance(data, dict)
    return data


async def test_pce_flow_over_stdio(tmp_path: Path, backend: Backend) -> None:
    async with Client(stdio_params(backend.url(tmp_path, "m.db"), "alice", "--toolsets", "pce")) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert len(names) == 6 and "pce.memory.policy.apply" in names
        claim = await _data(
            client,
            "pce.memory.upsert",
            text="解約APIは POST /subscriptions/{id}/cancel（非同期）",
            provenance=PROV,
        )
        # 1. activate: the context to paste at the top of the prompt
        ctx = await _data(client, "pce.memory.activate", q="解約API", allow=["answer:task"])
        assert [c["claim"]["id"] for c in ctx["claims"]] == [claim["id"]]  # type: ignore[index]
        resource = await client.read_resource(f"pce://active-context/{ctx['active_context_id']}")
        assert json.loads(resource.contents[0].text)["claims_count"] == 1  # type: ignore[union-attr]
        # 2. boundary.validate before generating: redact when not allowed
        check = await _data(client, "pce.memory.boundary.validate", payload="連絡は sato@example.jp へ")
        assert check["allowed"] is False and check["redacted"] == "連絡は [REDACTED:email] へ"
        # 3. upsert the decision, 4. feedback when it was used
        decided = await _data(
            client, "pce.memory.upsert", text="キャンセルは冪等に", kind="policy_hint", provenance=PROV
        )
        assert (await _data(client, "pce.memory.feedback", claim_id=decided["id"], signal="helpful"))[
            "ok"
        ] is True
        found = await _data(client, "pce.memory.search", query="キャンセル 冪等")
        assert found["items"][0]["claim"]["id"] == decided["id"]  # type: ignore[index]
        result = await client.call_tool(
            "pce.memory.feedback", {"claim_id": "clm_424242", "signal": "harmful"}
        )
        body = error_body(result)
        assert body["error"]["code"] == "UNKNOWN_CLAIM" and body["policy_version"] == "0.0.0"
