"""The vault toolset over stdio: a real `memhub serve` subprocess with --vault."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from mcp import Client

from tests.helpers import error, ok, stdio_params
from tests.services.vault.conftest import DESIGN, sample_vault
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


async def test_vault_flow_over_stdio(tmp_path: Path, backend: Backend) -> None:
    root = sample_vault(tmp_path)
    (root / "redos.md").write_text("a" * 40 + "b\n", encoding="utf-8")
    params = stdio_params(backend.url(tmp_path, "m.db"), "alice", "--toolsets", "vault", "--vault", str(root))
    async with Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert len(names) == 10 and "artifact_audit" in names
        found = await ok(client, "vault_find", query="ＷＡＬ モード")
        assert found["summary"]["integration_status"] == "ready"
        read = found["next_actions"][0]
        assert read["type"] == "vault_read"
        text = (await ok(client, "vault_read", **read["params"]))["text"]
        assert "WAL" in text
        scan = await ok(client, "vault_scan", path=DESIGN, chunk_lines=30)
        assert scan["eof"] is True and scan["next_actions"][0]["type"] == "vault_coverage"
        cover = await ok(client, "vault_coverage", path=DESIGN, cited_ranges=[scan["applied_range"]])
        assert cover["next_actions"][0]["type"] == "artifact_audit"
        audit = await ok(client, "artifact_audit", artifact_path="summaries/設計要約.md", source_path=DESIGN)
        assert audit["next_actions"] == [{"type": "stop", "confidence": 1.0, "params": None}]
        await ok(client, "vault_create", path="daily/2026-11-24.md", content="# 2026-11-24\n")
        await ok(client, "vault_write", path="daily/2026-11-24.md", content="- stdio\n", mode="append")
        assert (await error(client, "vault_create", {"path": "../out.md", "content": "x"}))[
            "code"
        ] == "out_of_scope"
        started = time.monotonic()
        redos = await ok(client, "vault_search", query="(a|aa)+$")
        assert redos["truncated"] is True and time.monotonic() - started < 5
        assert (await ok(client, "vault_ls", relative_dir="daily"))["entries"][-1][
            "path"
        ] == "daily/2026-11-24.md"
    assert (root / "daily/2026-11-24.md").read_text(encoding="utf-8") == "# 2026-11-24\n- stdio\n"
    assert not (tmp_path / "out.md").exists()


async def test_the_vault_defaults_to_home(tmp_path: Path, backend: Backend) -> None:
    params = stdio_params(backend.url(tmp_path, "m.db"), "alice", "--toolsets", "vault")
    params.args = ["--home", str(tmp_path), *params.args]
    async with Client(params) as client:
        assert (await ok(client, "vault_ls"))["entries"] == []
        await ok(client, "vault_create", path="first.md", content="hello\n")
    assert (tmp_path / "vault" / "first.md").read_text(encoding="utf-8") == "hello\n"
