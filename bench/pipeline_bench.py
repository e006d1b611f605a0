"""In-process latency of the retrieval pipeline's engine part (no MCP, no rerank), per query.

    .venv/bin/python bench/pipeline_bench.py --db /tmp/seeded/assoc-10000-e5+use.db --embedder e5+use

Opens a database seeded by bench/assoc_latency.py (`--seeded DIR`), builds the embedding
service, the vector search and the engine as the server does, loads the model and the index,
then times `SearchEngine.search` as assoc's memory search calls it (memories, 200 candidates
per side, alpha 0.5) over the assoc benchmark's queries, `--rounds` times; each query's
embedding comes from the service's cache after the first round, so the figure is the
pipeline's own work (keyword side, vector scan, visibility, fusion, transactions). The
first round (with the e5 query embedding) is reported apart; `--embed-every-time` turns the
query cache off (every search embeds, as a new query does). Run it once per checkout
(PYTHONPATH) to compare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import SUBJECTS_EN, SUBJECTS_JA
from memhub.core.models import Principal
from memhub.search import EmbeddingService, SearchEngine, make_embedder, vector_search_for
from memhub.services import access
from memhub.store.open import open_store

QUERIES = [*SUBJECTS_JA, *SUBJECTS_EN, "how do we deploy safely", "データベースの移行手順", "retry"]


def _p(times: list[float], share: float) -> float:
    ordered = sorted(times)
    return ordered[int(share * (len(ordered) - 1))]


async def measure(db: str, embedder_name: str, rounds: int, embed_every_time: bool) -> None:
    store = open_store(db)
    model = make_embedder(embedder_name)
    cache = 0 if embed_every_time else 512
    service = EmbeddingService(model, query_cache=cache) if model is not None else None
    vectors = vector_search_for(store, service.id, service.dim) if service is not None else None
    engine = SearchEngine(store, service, vectors)
    if service is not None:
        await service.load()
        await engine.warm()
    with store.transaction(write=False) as tx:
        viewer = access.viewer(tx, Principal(id="bench", default_project="bench"), sessions="current")
    first: list[float] = []
    cached: list[float] = []
    for round_ in range(rounds + 1):
        for query in QUERIES:
            started = time.perf_counter()
            await engine.search(
                viewer, query, kinds=("memory",), k_txt=200, k_vec=200, k_final=200, alpha=0.5
            )
            (first if round_ == 0 else cached).append((time.perf_counter() - started) * 1000)
    later = "every query embedded" if embed_every_time else "cached query embedding"
    print(
        f"{embedder_name}: first round (query embedded) p50 {statistics.median(first):.2f} ms;"
        f" {later} p50 / p95 {statistics.median(cached):.2f} / {_p(cached, 0.95):.2f} ms"
        f" ({len(cached)} searches)"
    )
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", required=True)
    parser.add_argument("--embedder", default="e5+use")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--embed-every-time", action="store_true", help="no query cache: every search embeds its query"
    )
    args = parser.parse_args()
    anyio.run(measure, args.db, args.embedder, args.rounds, args.embed_every_time)


if __name__ == "__main__":
    main()
