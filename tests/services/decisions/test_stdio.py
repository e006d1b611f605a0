"""The decisions toolset over stdio: a real `memhub serve` subprocess, the secret from its
environment, a proposal file in its home."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from memhub.services.decisions import proposals
from tests.helpers import MEMHUB, REPO, counts, error_body, ok
from tests.store.backends import Backend, selected

pytestmark = pytest.mark.anyio


def _params(home: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=MEMHUB,
        args=[
            "--home",
            str(home),
            "--db",
            selected().url(home),
            "--user",
            "alice",
            "--project",
            "demo",
            "serve",
            "--transport",
            "stdio",
        ],
        env={
            "MEMHUB_EMBEDDER": "none",
            "OMP_NUM_THREADS": "1",
            "PATH": "/usr/bin:/bin",
            "AGENT_MEMORY_SECRET": "s3cret-for-tests",
            "MEMHUB_REVIEW_WINDOW_S": "0",
            "PYTHONPATH": str(REPO / "src"),  # this checkout's source
        },
    )


async def test_decisions_flow_over_stdio(tmp_path: Path, backend: Backend) -> None:
    async with Client(_params(tmp_path)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"record_decision", "supersede_decision", "search_decisions", "accept_proposal"} <= tools
        old = (
            await ok(
                client,
                "record_decision",
                title="Use MySQL",
                target="database_policy",
                rationale="we know it well",
            )
        )["decision"]
        assert old["via"] == "mcp"
        new = (
            await ok(
                client,
                "supersede_decision",
                title="Use PostgreSQL",
                target="database_policy",
                rationale="JSON columns and better concurrency",
                old_decision_ids=[old["id"]],
            )
        )["decision"]
        strict = await ok(client, "search_decisions", query="MySQL", mode="strict")
        assert [(r["id"], r["status"], r["score"]) for r in strict["results"]] == [(new["id"], "active", 1.8)]
        audit = await ok(client, "search_decisions", query="MySQL", mode="audit")
        assert [r["chain"] for r in audit["results"]] == [[old["id"], new["id"]]] * 2

        before = counts(backend.url(tmp_path, "memhub.db"))
        bad = await client.call_tool("record_decision", {"title": "T", "target": "t", "rationale": "short"})
        assert bad.is_error and error_body(bad)["message"].startswith("Validation Error: rationale")
        denied = await client.call_tool("accept_proposal", {"proposal_id": "x.md", "secret": "wrong"})
        assert error_body(denied)["message"].startswith("Permission Denied")
        assert counts(backend.url(tmp_path, "memhub.db")) == before

        folder = tmp_path / "proposals"
        meta = {
            "project": "demo",
            "target": "database_policy",
            "title": "Use SQLite",
            "supersedes": [new["id"]],
        }
        path = proposals.write_new(folder, "by-hand", meta, "one file is all this project needs")
        done = await ok(client, "accept_proposal", proposal_id=path.name, secret="s3cret-for-tests")
        assert done["status"] == "success" and f"superseding {new['id']}" in done["message"]
        final = await ok(client, "search_decisions", query="MySQL PostgreSQL SQLite", mode="strict")
        assert [r["preview"] for r in final["results"]] == [
            "Use SQLite — one file is all this project needs [via MCP]"
        ]
