"""memhub beside other MCP memory servers: same machine, same run, same corpus, same MCP client.

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE MKL_NUM_THREADS=1 \\
        .venv/bin/python bench/peers/run.py [--systems memhub,server-memory,...] \\
        [--sizes 1000,10000] [--calls 100] [--seed-budget-s 600] [--out bench/results/peers.json] \\
        [--paired]   # every system open at once, calls in rotating order (bench/peers/paired.py)
        [--workdir DIR]  # --paired: keep the stores in DIR, continue from them next time

Run `bench/peers/install.sh` first (or `make bench-peers`, which does both). For each system:

1. Start its server over stdio (the official MCP Python client, `mcp.Client`), log its tools and
   their argument names, wait until it is ready (memhub: the e5 model loaded; mcp-memory-service:
   its model loaded by a first search).
2. Store distinct memories from `bench/corpus.py` one `store` call at a time until it holds each
   size (1,000, then 10,000: the same database grows). A system that needs more than
   `--seed-budget-s` seconds of storing in all is capped where it stands, and measured there.
3. At each size: the system settles (memhub: its background backfill embeds what was stored;
   `settle_s`), 10 warm-up calls of each kind, then `--calls` timed `store` round trips (new
   memories), settling again, and `--calls` timed `search` round trips (k=5, a fixed mix of
   Japanese and English keyword and phrase queries); p50/p95/mean in ms and the ratio to memhub's.
4. Retrieval quality, in a fresh server: LoCoMo conversation 0 (`../shared/data/locomo10.json`),
   one memory per dialog turn, `"[{session date}] {speaker}: {text}"`; every category 1-4
   question is searched (k=5) and scores a hit when a gold evidence turn is among the results
   (results are mapped back to dia_ids by name where the system keeps one, else by text).

Prints a table and writes bench/results/peers.json. Server stderr goes to
bench/results/peers-logs/<system>-<phase>.log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from adapters import ADAPTERS, FAILURES, THREAD_ENV, Adapter, connect, failure  # noqa: E402
from paired import PairedRun  # noqa: E402

from corpus import SUBJECTS_EN, SUBJECTS_JA, texts  # noqa: E402

RESULTS = HERE.parent / "results"
LOCOMO = HERE.parents[2] / "shared" / "data" / "locomo10.json"
K = 5
WARMUP = 10
QUERIES = [
    *SUBJECTS_JA,
    *SUBJECTS_EN,
    "retry with backoff",
    "SQLite WAL mode",
    "データベースの移行手順",
    "レビューで指摘された",
    "how do we deploy safely",
    "why did we pin every dependency",
]


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(samples_ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(pct(samples_ms, 0.5), 2),
        "p95_ms": round(pct(samples_ms, 0.95), 2),
        "mean_ms": round(statistics.fmean(samples_ms), 2),
    }


def distinct_texts() -> Iterator[str]:
    """Distinct synthetic memories, deterministic: `texts()` repeats some short ones."""
    seen: set[str] = set()
    for text in texts(60_000):
        if text not in seen:
            seen.add(text)
            yield text


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def describe_tools(client: Client) -> dict[str, list[str]]:
    tools: dict[str, list[str]] = {}
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            tools[tool.name] = sorted((tool.input_schema or {}).get("properties", {}))
        cursor = page.next_cursor
        if cursor is None:
            return tools


# -- latency -------------------------------------------------------------------------------------------


@dataclass
class LatencyRun:
    adapter: Adapter
    sizes: list[int]
    calls: int
    budget_s: float
    logs: Path
    report: dict[str, Any] = field(default_factory=dict)

    async def run(self) -> None:
        with tempfile.TemporaryDirectory(prefix=f"peers-{self.adapter.name}-") as tmp:
            log = self.logs / f"{self.adapter.name}-latency.log"
            started = time.perf_counter()
            async with connect(self.adapter, Path(tmp), log) as client:
                self.report["tools"] = await describe_tools(client)
                print(f"  tools: {json.dumps(self.report['tools'], ensure_ascii=False)}", flush=True)
                await self.adapter.prepare(client)
                self.report["ready_s"] = round(time.perf_counter() - started, 2)
                await self.measure_sizes(client)

    async def measure_sizes(self, client: Client) -> None:
        source = distinct_texts()
        stored = 0
        seeding_s = 0.0
        self.report["sizes"] = {}
        for size in self.sizes:
            began = time.perf_counter()
            capped = False
            while stored < size:
                if seeding_s + (time.perf_counter() - began) > self.budget_s:
                    capped = True
                    break
                await self.adapter.store(client, next(source), f"m{stored}")
                stored += 1
            spent = time.perf_counter() - began
            seeding_s += spent
            entry: dict[str, Any] = {"stored": stored, "seed_s": round(spent, 1), "capped": capped}
            if capped:
                entry["note"] = (
                    f"capped: {seeding_s:.0f} s of storing reached {stored:,} of {size:,} memories"
                )
            print(
                f"  {size:,}: {stored:,} stored in {spent:.1f} s{' (capped)' if capped else ''}", flush=True
            )
            settling = time.perf_counter()
            await self.adapter.settle(client)
            entry["settle_s"] = round(time.perf_counter() - settling, 1)
            entry.update(await self.measure(client, source, stored))
            stored += WARMUP + self.calls  # the timed stores added memories too
            store, search = entry["store"]["p50_ms"], entry["search"]["p50_ms"]
            print(f"  {size:,}: store p50 {store} ms, search p50 {search} ms", flush=True)
            self.report["sizes"][str(size)] = entry
            if capped:
                break

    async def measure(self, client: Client, source: Iterator[str], stored: int) -> dict[str, Any]:
        for i in range(WARMUP):
            await self.adapter.search(client, QUERIES[i % len(QUERIES)], K)
            await self.adapter.store(client, next(source), f"w{stored}-{i}")
        store_ms = []
        for i in range(self.calls):
            text = next(source)
            store_ms.append(await timed(lambda: self.adapter.store(client, text, f"t{stored}-{i}")))  # noqa: B023
        await self.adapter.settle(client)
        search_ms: list[float] = []
        empty = 0
        for i in range(self.calls):
            query = QUERIES[i % len(QUERIES)]
            started = time.perf_counter()
            found = await self.adapter.search(client, query, K)
            search_ms.append((time.perf_counter() - started) * 1000)
            empty += not found
        return {
            "store": summary(store_ms),
            "search": summary(search_ms),
            "searches_with_no_result": empty,
        }


# -- LoCoMo --------------------------------------------------------------------------------------

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


@dataclass(frozen=True)
class Locomo:
    turns: list[tuple[str, str]]  # (dia_id, memory text)
    questions: list[tuple[str, int, tuple[str, ...]]]  # (question, category, gold dia_ids)
    dropped: int  # category 1-4 questions whose evidence names no turn


def load_locomo(path: Path, conversation: int = 0) -> Locomo:
    sample = json.loads(path.read_text(encoding="utf-8"))[conversation]
    conv = sample["conversation"]
    sessions = sorted(
        (int(m[1]), key) for key in conv if (m := _SESSION.fullmatch(key)) and isinstance(conv[key], list)
    )
    turns = [
        (turn["dia_id"], f"[{conv.get(f'session_{n}_date_time', '')}] {turn['speaker']}: {turn['text']}")
        for n, key in sessions
        for turn in conv[key]
    ]
    ids = {dia_id for dia_id, _ in turns}
    questions = []
    dropped = 0
    for qa in sample["qa"]:
        category = int(qa["category"])
        if category > 4:
            continue
        gold: list[str] = []  # "D8:6; D9:17", "D:11:26", "D30:05" all occur: normalise
        for entry in qa.get("evidence", []):
            for match in _EVIDENCE.finditer(str(entry)):
                dia_id = f"D{int(match[1])}:{int(match[2])}"
                if dia_id in ids and dia_id not in gold:
                    gold.append(dia_id)
        if gold:
            questions.append((str(qa["question"]), category, tuple(gold)))
        else:
            dropped += 1
    return Locomo(turns, questions, dropped)


async def locomo_quality(adapter: Adapter, data: Locomo, logs: Path) -> dict[str, Any]:
    keys: dict[str, set[str]] = {}
    for dia_id, text in data.turns:
        keys.setdefault(text, set()).add(dia_id)
        keys.setdefault(dia_id, set()).add(dia_id)
    with tempfile.TemporaryDirectory(prefix=f"peers-{adapter.name}-locomo-") as tmp:
        async with connect(adapter, Path(tmp), logs / f"{adapter.name}-locomo.log") as client:
            await adapter.prepare(client)
            began = time.perf_counter()
            for dia_id, text in data.turns:
                await adapter.store(client, text, dia_id)
            await adapter.settle(client)
            store_s = time.perf_counter() - began
            hits = 0
            by_category: dict[int, list[int]] = {}
            unmapped = 0
            latencies = []
            for question, category, gold in data.questions:
                started = time.perf_counter()
                found = await adapter.search(client, question, K)
                latencies.append((time.perf_counter() - started) * 1000)
                got: set[str] = set()
                for item in found[:K]:
                    mapped = keys.get(item)
                    unmapped += mapped is None
                    got |= mapped or set()
                hit = int(bool(got & set(gold)))
                hits += hit
                by_category.setdefault(category, []).append(hit)
    n = len(data.questions)
    return {
        "memories": len(data.turns),
        "questions": n,
        "questions_dropped": data.dropped,
        "hit@5": round(hits / n, 3),
        "hit@5_by_category": {str(c): round(sum(v) / len(v), 3) for c, v in sorted(by_category.items())},
        "results_not_mapped": unmapped,
        "store_s": round(store_s, 1),
        "search": summary(latencies),
    }


# -- report ----------------------------------------------------------------------------------------


def ratio(report: dict[str, Any], name: str, size: str, op: str, stat: str) -> float | None:
    base = report.get("memhub", {}).get("latency", {}).get("sizes", {}).get(size)
    this = report.get(name, {}).get("latency", {}).get("sizes", {}).get(size)
    if not base or not this or name == "memhub":
        return None
    return round(float(this[op][stat]) / float(base[op][stat]), 2)


def print_table(systems: dict[str, Any], sizes: list[int]) -> None:
    print(
        f"\n{'system':<20}{'size':>8}{'stored':>8}{'store p50':>11}{'p95':>9}"
        f"{'search p50':>12}{'p95':>9}{'store x':>9}{'search x':>10}"
    )
    for name, entry in systems.items():
        if "error" in entry.get("latency", {}) or not entry.get("latency"):
            print(f"{name:<20}  {entry.get('latency', {}).get('error', entry.get('skipped', '?'))[:90]}")
            continue
        for size in sizes:
            row = entry["latency"]["sizes"].get(str(size))
            if row is None:
                continue
            store_x = ratio(systems, name, str(size), "store", "p50_ms")
            search_x = ratio(systems, name, str(size), "search", "p50_ms")
            xs = "".join(f"{'' if x is None else f'{x:.2f}':>{w}}" for x, w in ((store_x, 9), (search_x, 10)))
            print(
                f"{name:<20}{size:>8,}{row['stored']:>8,}{row['store']['p50_ms']:>11.1f}"
                f"{row['store']['p95_ms']:>9.1f}{row['search']['p50_ms']:>12.1f}{row['search']['p95_ms']:>9.1f}"
                f"{xs}"
            )
    print("\n(x = p50 ratio, system / memhub, at the same size; ms per MCP round trip over stdio)")
    print(f"\n{'LoCoMo conv-0, cats 1-4':<24}{'hit@5':>7}{'questions':>11}{'search p50':>12}  by category")
    for name, entry in systems.items():
        quality = entry.get("locomo")
        if not quality:
            continue
        if "error" in quality:
            print(f"{name:<24}  {quality['error'][:90]}")
            continue
        print(
            f"{name:<24}{quality['hit@5']:>7.3f}{quality['questions']:>11}{quality['search']['p50_ms']:>12.1f}"
            f"  {quality['hit@5_by_category']}"
        )


async def run_system(adapter: Adapter, args: argparse.Namespace, data: Locomo | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"version": adapter.version(), "notes": list(adapter.notes)}
    latency = LatencyRun(adapter, args.sizes, args.calls, args.seed_budget_s, args.logs)
    if args.sizes:
        try:
            await latency.run()
        except FAILURES as exc:
            latency.report["error"] = failure(exc, args.logs / f"{adapter.name}-latency.log")
            print(f"  FAILED: {latency.report['error']}", flush=True)
        entry["latency"] = latency.report
    if data is not None:
        try:
            entry["locomo"] = await locomo_quality(adapter, data, args.logs)
            print(f"  LoCoMo conv-0 hit@5 {entry['locomo']['hit@5']}", flush=True)
        except FAILURES as exc:
            entry["locomo"] = {"error": failure(exc, args.logs / f"{adapter.name}-locomo.log")}
            print(f"  LoCoMo FAILED: {entry['locomo']['error']}", flush=True)
    return entry


def run_paired(
    names: list[str], args: argparse.Namespace, data: Locomo | None, report: dict[str, Any]
) -> None:
    """`--paired`: latency with every available system open at once; LoCoMo one system at a time."""
    adapters = []
    for name in names:
        adapter = ADAPTERS[name]()
        reason = adapter.available()
        if reason is None:
            adapters.append(adapter)
        else:
            report["systems"][name] = {"skipped": reason}
            print(f"  {name} skipped: {reason}", flush=True)
    args.logs.mkdir(parents=True, exist_ok=True)
    paired = PairedRun(
        adapters,
        args.sizes,
        args.calls,
        args.seed_budget_s,
        args.logs,
        distinct_texts(),
        QUERIES,
        K,
        WARMUP,
        args.workdir,
    )
    report["paired"] = anyio.run(paired.run)
    for adapter in adapters:
        report["systems"].setdefault(
            adapter.name, {"version": adapter.version(), "notes": list(adapter.notes)}
        )
        if data is not None:
            try:
                quality = anyio.run(locomo_quality, adapter, data, args.logs)
            except FAILURES as exc:
                quality = {"error": failure(exc, args.logs / f"{adapter.name}-locomo.log")}
            report["systems"][adapter.name]["locomo"] = quality
            print(
                f"  {adapter.name} LoCoMo conv-0 hit@5 {quality.get('hit@5', quality.get('error'))}",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print(f"\nwritten {args.out}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--systems", default=",".join(ADAPTERS))
    parser.add_argument("--sizes", default="1000,10000", help="comma list; empty for LoCoMo only")
    parser.add_argument("--calls", type=int, default=100, help="timed calls of each kind per size")
    parser.add_argument("--seed-budget-s", type=float, default=600.0, help="storing time cap per system")
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--no-locomo", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "peers.json")
    parser.add_argument("--logs", type=Path, default=RESULTS / "peers-logs")
    parser.add_argument(
        "--paired",
        action="store_true",
        help="every system open at once, calls in rotating order (bench/peers/paired.py); "
        "ratios to the first system listed",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="--paired: keep the stores here and continue from them in a later run (state.json)",
    )
    parser.add_argument(
        "--model-threads",
        type=int,
        default=1,
        help="OMP_NUM_THREADS / MKL_NUM_THREADS of every server (PyTorch's threads for the "
        "peers' models); memhub chooses its own (e5 and BLAS on one thread per call)",
    )
    args = parser.parse_args()
    THREAD_ENV.update(OMP_NUM_THREADS=str(args.model_threads), MKL_NUM_THREADS=str(args.model_threads))
    args.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in ADAPTERS]
    if unknown:
        parser.error(f"unknown systems {unknown}; known: {list(ADAPTERS)}")
    data = None if args.no_locomo else load_locomo(args.locomo)

    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{os.cpu_count()} cores",
        "transport": "stdio, mcp Python client",
        "server_env": THREAD_ENV,
        "sizes": args.sizes,
        "calls": args.calls,
        "warmup_calls": WARMUP,
        "k": K,
        "seed_budget_s": args.seed_budget_s,
        "queries": QUERIES,
        "locomo": None
        if data is None
        else {"conversation": 0, "memories": len(data.turns), "questions": len(data.questions)},
        "systems": {},
    }
    if args.paired:
        run_paired(names, args, data, report)
        return
    for name in names:
        adapter = ADAPTERS[name]()
        print(f"\n== {name}", flush=True)
        reason = adapter.available()
        if reason is not None:
            report["systems"][name] = {"skipped": reason}
            print(f"  skipped: {reason}", flush=True)
            continue
        report["systems"][name] = anyio.run(run_system, adapter, args, data)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False))  # partial results survive
    print_table(report["systems"], args.sizes)
    for name, entry in report["systems"].items():
        for size, row in entry.get("latency", {}).get("sizes", {}).items():
            for op in ("store", "search"):
                row[f"{op}_p50_ratio_vs_memhub"] = ratio(report["systems"], name, size, op, "p50_ms")
                row[f"{op}_p95_ratio_vs_memhub"] = ratio(report["systems"], name, size, op, "p95_ms")
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
