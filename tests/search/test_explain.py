"""`explain`: the one retrieval pipeline records what it computed, and never changes a ranking.

With the hash embedder both sides run (keyword and vector), so every field is exercised;
the explanation's final scores equal the `search` tool's, its cosines the engine's.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from tests.conftest import make_settings
from tests.helpers import ok
from tests.pair import backfill_running, settled
from tests.store.backends import Backend

from memhub.cli.container import build_container
from memhub.core.models import Principal
from memhub.search.explain import Explanation
from memhub.search.fusion import fuse_hits
from memhub.services import access
from memhub.services.dashboard import finder

pytestmark = pytest.mark.anyio


def test_fusion_records_ranges_and_the_weight_used() -> None:
    explain = Explanation()
    hits = fuse_hits([(1, 2.0), (2, 1.0)], [], alpha=0.5, k_final=5, explain=explain)
    assert explain.alpha_used == 0.0  # no vector side: text weighs 1
    assert explain.text_range == (1.0, 2.0) and explain.text == {1: 2.0, 2: 1.0}
    assert explain.fused == {h.item_id: h.combined for h in hits} == {1: 1.0, 2: 0.0}
    rrf = Explanation()
    fuse_hits([(1, 2.0)], [(2, 0.9)], method="rrf", k_final=5, explain=rrf)
    assert rrf.vector == {2: 0.9} and set(rrf.fused) == {1, 2}


async def test_explanations_equal_the_tools_ranking(tmp_path: Path, backend: Backend) -> None:
    container = build_container(
        make_settings(tmp_path, backend, embedder="hash", toolsets=("assoc", "decisions"))
    )
    runtime = container.runtime
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(container.run_background)
        await backfill_running(container)
        async with Client(container.server) as client:
            for text in (
                "deploy pipeline runs nightly",
                "pipeline for deploys",
                "lunch menu",
                "設計方針の決定",
            ):
                await ok(client, "memory", action="store", content=text, domain="global")
            await ok(client, "memory", action="store", content="my own deploy pipeline note", domain="user")
            await settled(container)
            tool = (await ok(client, "search", type="semantic", query="deploy pipeline"))["memories"]
            me = Principal(container.principal.id, default_project="demo", via="dashboard")
            found = await finder.search_all(runtime, me, "deploy pipeline", container.states)
        tasks.cancel_scope.cancel()
    explain = found.explanations["memory"]
    assert explain.stage == "assoc" and explain.terms == ["deploy", "pipeline"]
    assert tool and [h.public_id for h in found.groups["memory"]] == [m["id"] for m in tool]
    for memory in tool:
        item = int(memory["id"].split("_")[1])
        assert round(explain.final[item], 4) == pytest.approx(memory["score"], abs=1e-4)
        if item in explain.vector:  # a single model: its own cosine is the engine's
            (cos,) = explain.models[item].values()
            assert cos == pytest.approx(explain.vector[item], abs=1e-5)
    assert explain.vector and explain.text and explain.vector_range[1] >= explain.vector_range[0]
    assert set(explain.found[int(tool[0]["id"].split("_")[1])]) <= {"deploy", "pipeline"}
    container.close()


async def test_explain_never_changes_the_hits(tmp_path: Path, backend: Backend) -> None:
    container = build_container(make_settings(tmp_path, backend, toolsets=("assoc",)))
    async with Client(container.server) as client:
        for n in range(12):
            await ok(client, "memory", action="store", content=f"deploy pipeline step {n}", domain="global")
    engine = container.runtime.search
    assert engine is not None
    with container.runtime.store.transaction(write=False) as tx:
        viewer = access.viewer(tx, container.principal)
    plain = await engine.search(viewer, "deploy step", kinds=("memory",), k_final=5)
    explain = Explanation()
    explained = await engine.search(viewer, "deploy step", kinds=("memory",), k_final=5, explain=explain)
    assert plain == explained
    assert explain.hidden["text_by_boundary"] == 0 and explain.query == "deploy step"
    container.close()
