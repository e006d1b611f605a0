"""Where one memory search goes, in process, through the in-memory MCP client.

    .venv/bin/python bench/search_breakdown.py --db /tmp/seeded/assoc-100000-e5+use.db \
        [--embedder e5+use] [--queries 200] [--profile out.prof]

Builds the server as `memhub serve` does (the composition root, the assoc toolset, the
background warm-up), on a copy of a database seeded by bench/assoc_latency.py (`--seeded`),
waits until every vector is indexed, then calls `memory(action="search")` through the MCP
client in process (no stdio framing, no second process) with the assoc benchmark's queries,
and times the stages by wrapping the functions that run them (inclusive times: a stage's
figure contains the stages it calls). Reported per search: mean and p50 ms of each stage,
and the whole call; then when each stage that runs once a search starts and ends, ms from the
call's start (p50s): which stages run side by side, and which one the call waits for (with
`--profile` every stage is stretched by the profiler).
`--profile FILE` also writes a cProfile of the timed calls (the event loop's thread) and
`FILE.threads`, one of the work the timed calls ran on worker threads
(`anyio.to_thread.run_sync`: the snapshot's work with its rerank, the vector index's
arithmetic), in CPU time: cProfile follows one thread, so each such call is profiled on its
own thread and the profiles are added up.
Run it once per checkout (PYTHONPATH) to compare.

`--db postgresql://…` times a PostgreSQL store instead, used as it is (not copied: its
searches bump access counts, which the ranking reads, so `--dump` and `--memo-keywords` are
refused there): a database seeded by `bench.assoc_latency.seed(url, n, embedder)` (it ends
with ANALYZE, as autovacuum would within a minute); the PostgreSQL stages (`PostgresTx`, the
BM25 computed in Python, the nearest-neighbour query) are timed too.

`--concurrent N` runs N searches at once (in rounds, the bench queries) and reports each
call's p50/p95 and each round's p50 instead of the stages.

`--fresh` times queries that are each new to the server (the `--dump` texts, in order): every
search then embeds its query, where the default's repeated queries come from the cache.

`--memo-keywords` answers each keyword side (`SqliteTx.text_search`) from a memo of its first
answer for the same terms: the whole search as it would be with a keyword side that costs
nothing (what an in-process keyword index could at best give; a measurement, not a mode).

`--dump FILE` instead writes what 200 fixed queries return (the bench queries, then single
sentences of the seeded corpus' kind): one JSON line per query, its results in order (id,
score, similarity). Run it once per checkout on the same database and compare the files
(`cmp`) to show a change leaves the rankings alone.

`--rss` instead follows the process's resident memory (VmRSS, and the peak VmHWM, MiB) through
the steps of bench/assoc_latency.py: index loaded, 10 searches, 100 stores and their backfill,
300 searches; each step's figure is read after it (malloc's heap is not trimmed by the bench),
then once more after `malloc_trim` (the memory held, without the free heap glibc kept).
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import json
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import QUERIES
from corpus import queries as corpus_queries
from memhub.cli.container import build_container
from memhub.core.memory import release_free_memory
from memhub.core.settings import Settings
from memhub.services.runtime import Runtime

_times: dict[str, list[float]] = defaultdict(list)
_cpu: dict[str, list[float]] = defaultdict(list)  # a sync stage's CPU time on its thread
# a stage's runs: (which call, start, end: ms from that call's start)
_spans: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
_call = {"index": -1, "start": 0.0}  # the timed call running, and when it began (perf_counter)
_lock = threading.Lock()


def _record(name: str, started: float) -> None:
    ended = time.perf_counter()
    _times[name].append((ended - started) * 1000)
    index, began = int(_call["index"]), _call["start"]
    _spans[name].append((index, (started - began) * 1000, (ended - began) * 1000))


def _timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            with _lock:
                _record(name, started)
                _cpu[name].append((time.thread_time() - cpu) * 1000)

    return wrapper


def _timed_async(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            with _lock:
                _record(name, started)

    return wrapper


def _memo_keywords() -> None:
    """`SqliteTx.text_search` answered from a memo of its first answer per (terms, kinds,
    project, limit; the bench has one viewer): the keyword side at no cost (`--memo-keywords`,
    SQLite stores only)."""
    from memhub.store.sqlite.tx import SqliteTx

    search = SqliteTx.text_search
    memo: dict[tuple[Any, ...], list[tuple[int, float]]] = {}

    def remembered(self: SqliteTx, viewer: Any, terms: Any, kinds: Any, project_id: Any, limit: int) -> Any:
        key = (tuple(terms), tuple(kinds), project_id, limit)
        if key not in memo:
            memo[key] = search(self, viewer, terms, kinds, project_id, limit)
        return memo[key]

    SqliteTx.text_search = remembered  # type: ignore[method-assign,assignment]


BACKEND_TXS = (("memhub.store.sqlite.tx", "SqliteTx"), ("memhub.store.postgres.tx", "PostgresTx"))


def _instrument() -> None:
    """Wrap the stages of a memory search (whatever exists in the checkout on PYTHONPATH)."""
    import importlib

    targets = [
        ("memhub.services.runtime", "Call", "catch_up", True),
        ("memhub.services.assoc.search", None, "ranked", True),
        ("memhub.search.engine", "SearchEngine", "run", True),
        ("memhub.search.engine", "SearchEngine", "_text_hits", False),
        ("memhub.search.engine", "SearchEngine", "_vector_hits", False),
        ("memhub.search.engine", "_QueryVector", "wait", True),
        ("memhub.search.engine", "_VectorSide", "wait", True),
        ("memhub.search.engine", "SearchEngine", "_vector_side", True),
        ("memhub.search.vectors", "VectorIndex", "prepare", False),
        ("memhub.search.engine", None, "fuse_hits", False),
        ("memhub.search.embedding", "EmbeddingService", "embed_query", True),
        ("memhub.search.vectors", "VectorIndex", "refresh", False),
        ("memhub.search.vectors", "VectorIndex", "search", False),
        ("memhub.search.vectors", "VectorIndex", "_best", False),
        ("memhub.search.vectors", "VectorIndex", "_rescore", False),
        ("memhub.search.vectors", "VectorIndex", "_scan", False),
        ("memhub.search.vectors", None, "_scores", False),
        ("memhub.services.assoc.domains", None, "to_memory", False),
        ("memhub.services.access", None, "viewer", False),
        ("memhub.services.deferred", "DeferredWrites", "flush", False),
        ("memhub.store.postgres.tx", "PostgresTx", "text_search", False),
        ("memhub.store.postgres.tx", "PostgresTx", "nearest_vectors", False),
        ("memhub.store.postgres.bm25", None, "ranked", False),
        ("memhub.search.store_vectors", "StoreVectorSearch", "prepare", False),
        *(  # each backend's store reads (either may be missing from a checkout)
            (module, owner, read, False)
            for module, owner in BACKEND_TXS
            for read in ("visible_ids", "get_vectors", "query_briefs", "norm_texts", "query_items")
        ),
    ]
    for module_name, owner_name, attr, is_async in targets:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:  # an older checkout, or no psycopg: nothing of it to time
            continue
        owner = getattr(module, owner_name, None) if owner_name else module
        if owner is None:
            continue
        fn = getattr(owner, attr, None)
        if fn is None:
            continue
        label = f"{owner_name or module_name.rsplit('.', 1)[-1]}.{attr}"
        setattr(owner, attr, (_timed_async if is_async else _timed)(label, fn))
    # the toolset's rerank (a closure handed to `retrieve`, run inside SearchEngine.run)
    assoc_search = importlib.import_module("memhub.services.assoc.search")
    retrieve = assoc_search.retrieve

    async def timed_retrieve(call: Any, query: str, viewer: Any, rerank: Any, **kwargs: Any) -> Any:
        return await retrieve(call, query, viewer, _timed("assoc rerank", rerank), **kwargs)

    assoc_search.retrieve = timed_retrieve


class _ThreadProfiles:
    """cProfile of what `anyio.to_thread.run_sync` runs while `on`: one profile per call, on
    its own thread, added up in `stats` (cProfile follows the thread that enables it)."""

    def __init__(self) -> None:
        self.on = False
        self.stats: pstats.Stats | None = None
        self._lock = threading.Lock()
        original = anyio.to_thread.run_sync

        async def run_sync(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            return await original(self._profiled(func), *args, **kwargs)

        anyio.to_thread.run_sync = run_sync  # type: ignore[assignment]

    def _profiled(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if not self.on:
                return func(*args)
            profiler = cProfile.Profile(time.thread_time)  # CPU: its waits for the other side cost ~0
            profiler.enable()
            try:
                return func(*args)
            finally:
                profiler.disable()
                with self._lock:
                    if self.stats is None:
                        self.stats = pstats.Stats(profiler)
                    else:
                        self.stats.add(profiler)

        return call


def _sqlite_heap_mib() -> float | None:
    """SQLite's own heap in this process (sqlite3_status64 MEMORY_USED: page caches, schemas,
    statements of every connection), or None where the library cannot be reached."""
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
    except OSError:
        return None
    current, highest = ctypes.c_int64(), ctypes.c_int64()
    if lib.sqlite3_status64(0, ctypes.byref(current), ctypes.byref(highest), 0) != 0:
        return None
    return current.value / 2**20


def _rss(store: Any = None) -> str:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    rss, peak, anon, file = (
        int(status[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM", "RssAnon", "RssFile")
    )
    line = f"{rss:7.1f} MiB (peak {peak:7.1f}; anon {anon:6.1f}, file {file:5.1f}"
    sqlite_heap = _sqlite_heap_mib()
    if sqlite_heap is not None:
        line += f"; SQLite heap {sqlite_heap:5.1f}"
    readers = getattr(store, "_readers", None)
    if isinstance(readers, list):
        line += f", {len(readers)} readers"
    return line + ")"


async def _wait_for_backfill(client: Client) -> None:
    while True:
        result = await client.call_tool("admin", {"action": "health_check"})
        if not (result.structured_content or {}).get("details", {}).get("vectors_pending"):
            return
        await anyio.sleep(0.1)


async def _rss_steps(client: Client, rng: random.Random, store: Any) -> None:
    from corpus import texts

    print(f"index loaded, model ready          {_rss(store)}")
    search = {"action": "search", "threshold": 0.0}
    for n in (1, 9):
        for _ in range(n):
            await client.call_tool("memory", {**search, "query": rng.choice(QUERIES)})
        print(f"+ {n} search(es)                     {_rss(store)}")
    for text in texts(100, seed=99):
        await client.call_tool("memory", {"action": "store", "content": text, "domain": "user"})
    print(f"+ 100 stores                        {_rss(store)}")
    await _wait_for_backfill(client)
    print(f"+ their backfill                    {_rss(store)}")
    for _ in range(300):
        await client.call_tool("memory", {**search, "query": rng.choice(QUERIES)})
    print(f"+ 300 searches                      {_rss(store)}")
    release_free_memory()  # what is left is held, not free heap glibc kept (core/memory.py)
    print(f"+ malloc_trim                       {_rss(store)}")


def _dump_queries(n: int = 200) -> list[str]:
    """The bench queries, then single sentences the seeded corpus is made of (a fixed seed)."""
    return corpus_queries(n)


async def _dump(client: Client, out: Path) -> None:
    search = {"action": "search", "threshold": 0.0}
    with out.open("w", encoding="utf-8") as file:
        for query in _dump_queries():
            result = await client.call_tool("memory", {**search, "query": query})
            assert not result.is_error, result.content
            found = (result.structured_content or {}).get("memories", [])
            ranked = [[hit.get("id"), hit.get("score"), hit.get("similarity")] for hit in found]
            file.write(json.dumps({"query": query, "results": ranked}, ensure_ascii=False) + "\n")
    print(f"wrote {out}")


async def _warm(runtime: Runtime) -> None:
    """Until the model is ready and every stored vector is in the index (its sketch fitted)."""
    engine, embedding = runtime.search, runtime.embedding
    if engine is None or engine.vectors is None or embedding is None:
        return
    vectors = engine.vectors
    with runtime.store.transaction(write=False) as tx:
        stored = tx.vector_count(vectors.embedder_id)
    while not embedding.ready or vectors.size() < stored:
        await anyio.sleep(0.2)
    await anyio.to_thread.run_sync(vectors.refresh)  # waits for the first load's own refresh


async def measure(
    db: Path | str,
    home: Path,
    embedder: str,
    queries: int,
    profile: str | None,
    rss: bool,
    dump: Path | None = None,
    fresh: bool = False,
    at_once: int = 1,
) -> None:
    if not rss and dump is None:
        _instrument()
    settings = Settings(home=home, user="bench", project="bench", db=str(db), embedder=embedder)
    container = build_container(settings)
    runtime = container.runtime
    rng = random.Random(9)
    async with anyio.create_task_group() as group:
        group.start_soon(container.run_background)
        await _warm(runtime)
        async with Client(container.server) as client:
            if dump is not None:
                await _dump(client, dump)
            elif rss:
                await _rss_steps(client, rng, runtime.store)
            else:
                await _timed_searches(client, rng, queries, profile, fresh, at_once)
        group.cancel_scope.cancel()
    container.close()


async def _concurrent_searches(client: Client, rng: random.Random, queries: int, at_once: int) -> None:
    """`queries` searches, `at_once` of them at a time: each call's time and each round's."""
    search = {"action": "search", "threshold": 0.0}
    calls: list[float] = []
    rounds: list[float] = []

    async def one(query: str) -> None:
        started = time.perf_counter()
        result = await client.call_tool("memory", {**search, "query": query})
        calls.append((time.perf_counter() - started) * 1000)
        assert not result.is_error, result.content

    cpu_started = time.process_time()
    for _ in range(max(1, queries // at_once)):
        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(at_once):
                group.start_soon(one, rng.choice(QUERIES))
        rounds.append((time.perf_counter() - started) * 1000)
    cpu_ms = (time.process_time() - cpu_started) * 1000 / len(calls)
    p95 = sorted(calls)[int(0.95 * (len(calls) - 1))]
    print(f"{len(calls)} memory searches, {at_once} at once: p50 {statistics.median(calls):.2f} ms,"
          f" p95 {p95:.2f} ms; a round of {at_once} p50 {statistics.median(rounds):.2f} ms;"
          f" CPU per search {cpu_ms:.2f} ms")  # fmt: skip


async def _timed_searches(
    client: Client,
    rng: random.Random,
    queries: int,
    profile: str | None,
    fresh: bool = False,
    at_once: int = 1,
) -> None:
    search = {"action": "search", "threshold": 0.0}
    for _ in range(10):
        await client.call_tool("memory", {**search, "query": "warm up"})
    if at_once > 1:
        await _concurrent_searches(client, rng, queries, at_once)
        return
    _times.clear()
    _cpu.clear()
    _spans.clear()
    calls: list[float] = []
    profiler = cProfile.Profile() if profile else None
    threads = _ThreadProfiles() if profile else None
    if threads is not None:
        threads.on = True
    texts = _dump_queries(queries) if fresh else [rng.choice(QUERIES) for _ in range(queries)]
    cpu_started = time.process_time()
    for index, query in enumerate(texts):
        if profiler is not None:
            profiler.enable()
        _call["index"] = index
        started = _call["start"] = time.perf_counter()
        result = await client.call_tool("memory", {**search, "query": query})
        calls.append((time.perf_counter() - started) * 1000)
        if profiler is not None:
            profiler.disable()
        assert not result.is_error, result.content
    cpu_ms = (time.process_time() - cpu_started) * 1000 / queries
    if profiler is not None and profile:
        profiler.dump_stats(profile)
    if threads is not None and threads.stats is not None and profile:
        threads.on = False
        threads.stats.dump_stats(f"{profile}.threads")
    p95 = sorted(calls)[int(0.95 * (len(calls) - 1))]
    print(f"{queries} memory searches, p50 {statistics.median(calls):.2f} ms, p95 {p95:.2f} ms")
    # CPU of the whole process (every thread) per search: steadier than wall time on a busy machine
    print(f"CPU per search {cpu_ms:.2f} ms (process time, all threads, the client's included)")
    # cpu: the CPU time of a stage that runs on one thread (its own thread's), per search
    heads = ("calls/search", 12), ("ms/search", 10), ("p50/call", 9), ("cpu/search", 10), ("cpu p50", 8)
    print(f"{'stage':32} " + " ".join(f"{head:>{width}}" for head, width in heads))
    for name, values in sorted(_times.items(), key=lambda kv: -sum(kv[1])):
        per_search, total = len(values) / queries, sum(values) / queries
        cpu = ""
        if name in _cpu:
            cpu = f"{sum(_cpu[name]) / queries:10.2f} {statistics.median(_cpu[name]):8.2f}"
        print(f"{name:32} {per_search:12.2f} {total:10.2f} {statistics.median(values):9.2f} {cpu}")
    print(f"\n{'once a search: starts, ends (ms from the call)':48} {'start':>8} {'end':>8}")
    # stages that ran exactly once in every call (not those run several times a search, nor
    # background work that happened to end during one)
    every = list(range(queries))
    once = {name: runs for name, runs in _spans.items() if sorted(i for i, _, _ in runs) == every}
    for name, runs in sorted(once.items(), key=lambda kv: statistics.median(start for _, start, _ in kv[1])):
        start, end = statistics.median(s for _, s, _ in runs), statistics.median(e for _, _, e in runs)
        print(f"{name:48} {start:8.2f} {end:8.2f}")
    print(f"{'the call':48} {0.0:8.2f} {statistics.median(calls):8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--db", required=True, help="a database seeded by assoc_latency.py --seeded, or a postgresql:// URL"
    )
    parser.add_argument("--embedder", default="e5+use")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--profile", help="write a cProfile of the timed calls here")
    parser.add_argument("--rss", action="store_true", help="resident memory after each step instead")
    parser.add_argument("--dump", type=Path, help="write 200 fixed queries' results here instead")
    parser.add_argument("--fresh", action="store_true", help="every query text new to the server (embedded)")
    parser.add_argument("--concurrent", type=int, default=1, help="searches at once (calls' p50/p95 only)")
    parser.add_argument(
        "--memo-keywords", action="store_true", help="the keyword side from a memo: its cost taken away"
    )
    args = parser.parse_args()
    on_postgresql = args.db.startswith(("postgresql://", "postgres://"))
    if on_postgresql and (args.dump or args.memo_keywords):
        # its searches bump access counts, which rank: a second checkout's dump would differ
        parser.error("--dump and --memo-keywords need a SQLite file (a PostgreSQL store is used in place)")
    if args.memo_keywords:
        _memo_keywords()
    with tempfile.TemporaryDirectory() as tmp:
        db: Path | str = args.db  # a PostgreSQL database is used as it is, not copied
        if not on_postgresql:
            db = Path(tmp) / "bench.db"
            shutil.copyfile(args.db, db)
        anyio.run(
            measure, db, Path(tmp), args.embedder, args.queries, args.profile, args.rss, args.dump,
            args.fresh, args.concurrent,
        )  # fmt: skip


if __name__ == "__main__":
    main()
