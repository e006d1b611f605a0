"""Where the backfill's time goes, in process: `--n` memories imported, embedded and linked.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 PYTHONPATH=<checkout>/src \\
        .venv/bin/python bench/indexing_stages.py [--embedder use] [--n 2000] [--stages] [--links F]

Builds the server as `memhub serve` does (the composition root, its background tasks) on a
fresh database, waits for the model, then imports `--n` memories of bench/corpus.py through the
in-memory MCP client (`memory_manage(import)`, 1,000 a call) and polls `admin(health_check)`
until no vector is pending. Prints memories/s end to end and the process's CPU seconds.
`--stages` also times the backfill's stages by wrapping the functions that run them (inclusive
wall seconds, and CPU seconds of the thread for the ones that run on a worker thread); the
wrappers cost a little, so compare rates without it. `--links F` writes the semantic links made
(`src dst strength`), to check that two checkouts link alike. Run it once per checkout (PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import texts
from memhub.cli.container import build_container
from memhub.core.settings import Settings
from search_breakdown import _cpu, _timed, _timed_async, _times  # the same stage timers


def _instrument(runtime: Any) -> None:
    from memhub.search import calibration, engine, vectors
    from memhub.search.backfill import VectorBackfill
    from memhub.services.assoc import memories

    for name in ("_store_vectors", "_missing", "_claim"):
        setattr(VectorBackfill, name, _timed(f"backfill.{name}", getattr(VectorBackfill, name)))
    for name in ("_finish", "_embed_next"):
        setattr(VectorBackfill, name, _timed_async(f"backfill.{name}", getattr(VectorBackfill, name)))
    model = type(runtime.embedding.embedder)  # the query instance's and the indexer's class
    model.embed_passages = _timed("embed_passages (worker)", model.embed_passages)
    engine.SearchEngine._search_index = _timed("links: nearest (worker)", engine.SearchEngine._search_index)  # type: ignore[method-assign]
    vectors.VectorIndex.refresh = _timed("index.refresh", vectors.VectorIndex.refresh)  # type: ignore[method-assign]
    runtime.backfill.on_embedded = _timed_async("on_embedded (links)", runtime.backfill.on_embedded)
    memories.calibration.profile = _timed("links: calibration.profile", calibration.profile)  # type: ignore[attr-defined]
    memories.ranking.associations = _timed("links: ranking.associations", memories.ranking.associations)  # type: ignore[attr-defined]


async def _health(client: Client) -> dict[str, Any]:
    result = await client.call_tool("admin", {"action": "health_check"})
    return dict((result.structured_content or {}).get("details", {}))


def _dump_links(db: Path, out: Path) -> None:
    """The semantic links made, one `src dst strength` line each (to compare two checkouts)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT src, dst, strength FROM links WHERE subtype = 'semantic' ORDER BY src, dst"
        ).fetchall()
    out.write_text("".join(f"{src} {dst} {strength}\n" for src, dst, strength in rows))
    print(f"  {len(rows)} semantic links written to {out}")


async def measure(embedder: str, n: int, stages: bool, links: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        settings = Settings(
            home=home, user="bench", project="bench", db=str(home / "m.db"), embedder=embedder
        )
        container = build_container(settings)
        memories = [f"{text} (#{i})" for i, text in enumerate(texts(n))]
        async with anyio.create_task_group() as group:
            group.start_soon(container.run_background)
            async with Client(container.server) as client:
                while not (await _health(client)).get("embedder_ready"):
                    await anyio.sleep(0.1)
                if stages:
                    _instrument(container.runtime)
                started, cpu = time.perf_counter(), time.process_time()
                for at in range(0, n, 1000):
                    batch = [{"content": text, "domain": "user"} for text in memories[at : at + 1000]]
                    data = json.dumps({"memories": batch})
                    result = await client.call_tool(
                        "memory_manage", {"action": "import", "import_data": data}
                    )
                    assert not result.is_error, result.content
                imported = time.perf_counter() - started
                while (await _health(client)).get("vectors_pending") != 0:
                    await anyio.sleep(0.05)
                wall, used = time.perf_counter() - started, time.process_time() - cpu
            group.cancel_scope.cancel()
        container.close()
        if links is not None:
            _dump_links(home / "m.db", links)
    print(f"{embedder}: {n} memories in {wall:.2f} s ({n / wall:.1f}/s; the import {imported:.2f} s)")
    print(f"  the process's CPU {used:.2f} s")
    totals = {name: sum(times) / 1000 for name, times in _times.items()}
    for name in sorted(totals, key=lambda key: -totals[key]):
        cpu = sum(_cpu.get(name, ())) / 1000
        print(f"  {name:34s} calls {len(_times[name]):6d}  wall {totals[name]:6.2f} s  cpu {cpu:6.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="use")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--stages", action="store_true", help="time the backfill's stages too")
    parser.add_argument("--links", type=Path, help="write the semantic links made to this file")
    args = parser.parse_args()
    anyio.run(measure, args.embedder, args.n, args.stages, args.links)


if __name__ == "__main__":
    main()
