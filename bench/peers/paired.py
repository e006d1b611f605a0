"""Paired mode of bench/peers/run.py (`--paired`): every system open at once, the same calls
in rotating order, so a ratio between two systems never drifts with the machine's load.

All servers are started together (each in its own directory) and get the same memories: the
k-th memory is stored in every system, the first system changing from one memory to the next.
At each size all of them settle (memhub: vectors made), then `calls` rounds of one `store` in
every system (rotating order) and, after settling again, `calls` rounds of one `search` (the
same query in every system, rotating order), then `calls` rounds of a `search` whose text no
server has seen (the query list's text and a round tag: `search_fresh`, where no cache of
query embeddings answers; the repeated list is what agents do, the fresh texts what a model
costs). Per system: p50/p95/mean; per system and round,
the ratio to the base system's sample in that same round, whose median is the paired ratio.

A system that fails is dropped from the later rounds, with its error in the report; seeding
stops for everyone at `--seed-budget-s` (the sizes reached are measured, `capped` says so).

`--workdir DIR` keeps the stores in DIR instead of a temporary directory, with `state.json`
saying how many memories every system holds and how many corpus texts were used: a later run
with the same systems and DIR continues from there (seeding 10,000 memories into a peer that
takes ~0.3 s a store is done once; each run still stores its `calls` timed memories per size).
Use it to compare two checkouts of memhub on the same stores (PYTHONPATH).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

from adapters import FAILURES, Adapter, connect, failure
from mcp import Client

from common import summary

Live = list[tuple[Adapter, Client]]


def rotated(items: Sequence[Any], start: int) -> list[Any]:
    start %= max(1, len(items))
    return [*items[start:], *items[:start]]


def paired_summary(samples: dict[str, list[float]], base: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, values in samples.items():
        entry: dict[str, Any] = summary(values)
        reference = samples.get(base)
        if reference and name != base:
            ratios = [v / r for v, r in zip(values, reference, strict=False) if r > 0]
            entry["paired_ratio_median"] = round(statistics.median(ratios), 2) if ratios else None
        out[name] = entry
    return out


class PairedRun:
    def __init__(
        self,
        adapters: list[Adapter],
        sizes: list[int],
        calls: int,
        budget_s: float,
        logs: Path,
        source: Iterator[str],
        queries: Sequence[str],
        k: int,
        warmup: int,
        workdir: Path | None = None,
    ) -> None:
        self.adapters = adapters
        self.workdir = workdir
        self.stored = self.consumed = 0
        self.sizes, self.calls, self.budget_s, self.logs = sizes, calls, budget_s, logs
        self.source, self.queries, self.k, self.warmup = source, queries, k, warmup
        self.base = adapters[0].name
        self.report: dict[str, Any] = {"base": self.base, "systems": [a.name for a in adapters], "errors": {}}

    def resume(self, root: Path) -> None:
        """Continue from the stores a previous run with the same systems left in `root`."""
        state = root / "state.json"
        if not state.exists():
            return
        saved = json.loads(state.read_text())
        if saved["systems"] != [a.name for a in self.adapters]:
            raise SystemExit(f"{root} holds stores of {saved['systems']}: the same --systems, or another dir")
        self.stored, self.consumed = saved["stored"], saved["consumed"]
        for _ in range(self.consumed):
            next(self.source)
        self.report["resumed_from"] = self.stored
        print(f"  resuming: {self.stored:,} memories already stored in {root}", flush=True)

    def save(self) -> None:
        if self.workdir is not None:
            systems = [a.name for a in self.adapters]
            state = {"systems": systems, "stored": self.stored, "consumed": self.consumed}
            (self.workdir / "state.json").write_text(json.dumps(state))

    def text(self) -> str:
        self.consumed += 1
        return next(self.source)

    async def run(self) -> dict[str, Any]:
        with ExitStack() as dirs:
            if self.workdir is None:
                root = Path(dirs.enter_context(tempfile.TemporaryDirectory(prefix="peers-paired-")))
            else:
                root = self.workdir
                root.mkdir(parents=True, exist_ok=True)
                self.resume(root)
            async with AsyncExitStack() as stack:
                live: Live = []
                for adapter in self.adapters:
                    log = self.logs / f"{adapter.name}-paired.log"
                    work = root / adapter.name
                    work.mkdir(exist_ok=True)
                    try:
                        client = await stack.enter_async_context(connect(adapter, work, log))
                        await adapter.prepare(client)
                    except FAILURES as exc:
                        self.report["errors"][adapter.name] = failure(exc, log)
                        continue
                    live.append((adapter, client))
                print(f"  open at once: {', '.join(a.name for a, _ in live)}", flush=True)
                await self.measure_sizes(live)
        return self.report

    async def each(self, live: Live, start: int, op: str, *args: Any) -> dict[str, float]:
        """Call `op` once in every live system, in rotating order; ms per system. A system that
        fails leaves `live` (its error is kept)."""
        times: dict[str, float] = {}
        for adapter, client in rotated(list(live), start):
            began = time.perf_counter()
            try:
                await getattr(adapter, op)(client, *args)
            except FAILURES as exc:
                self.report["errors"][adapter.name] = f"{op}: {type(exc).__name__}: {exc}"
                live.remove((adapter, client))
                continue
            times[adapter.name] = (time.perf_counter() - began) * 1000
        return times

    async def settle(self, live: Live) -> None:
        for adapter, client in list(live):
            await adapter.settle(client)

    async def measure_sizes(self, live: Live) -> None:
        stored = self.stored
        began = time.perf_counter()
        self.report["sizes"] = {}
        for size in self.sizes:
            capped = False
            while stored < size:
                if time.perf_counter() - began > self.budget_s:
                    capped = True
                    break
                await self.each(live, stored, "store", self.text(), f"m{stored}")
                stored += 1
                if stored % 500 == 0:
                    self.stored = stored
                    self.save()
            await self.settle(live)
            for i in range(self.warmup):
                await self.each(live, i, "search", self.queries[i % len(self.queries)], self.k)
            store: dict[str, list[float]] = {a.name: [] for a, _ in live}
            search: dict[str, list[float]] = {a.name: [] for a, _ in live}
            for i in range(self.calls):
                for name, ms in (await self.each(live, i, "store", self.text(), f"t{stored}-{i}")).items():
                    store[name].append(ms)
            stored += self.calls
            self.stored = stored
            self.save()
            await self.settle(live)
            for i in range(self.calls):
                query = self.queries[i % len(self.queries)]
                for name, ms in (await self.each(live, i, "search", query, self.k)).items():
                    search[name].append(ms)
            fresh: dict[str, list[float]] = {a.name: [] for a, _ in live}
            for i in range(self.calls):  # a text no server has seen: no cache of query embeddings helps
                query = f"{self.queries[i % len(self.queries)]} q{stored}x{i}"
                for name, ms in (await self.each(live, i, "search", query, self.k)).items():
                    fresh[name].append(ms)
            entry = {
                "stored": stored,
                "capped": capped,
                "store": paired_summary({n: v for n, v in store.items() if v}, self.base),
                "search": paired_summary({n: v for n, v in search.items() if v}, self.base),
                "search_fresh": paired_summary({n: v for n, v in fresh.items() if v}, self.base),
            }
            self.report["sizes"][str(size)] = entry
            print_paired(size, entry)
            if capped:
                break


def print_paired(size: int, entry: dict[str, Any]) -> None:
    print(f"\n  paired, {entry['stored']:,} memories{' (capped)' if entry['capped'] else ''}")
    print(f"  {'system':<20}{'store p50':>10}{'p95':>8}{'x':>7}{'search p50':>12}{'p95':>8}{'x':>7}")
    for name, search in entry["search"].items():
        store = entry["store"].get(name, {})
        nan = float("nan")
        print(
            f"  {name:<20}{store.get('p50_ms', nan):>10.1f}{store.get('p95_ms', nan):>8.1f}"
            f"{store.get('paired_ratio_median') or 1.0:>7.2f}"
            f"{search['p50_ms']:>12.1f}{search['p95_ms']:>8.1f}"
            f"{search.get('paired_ratio_median') or 1.0:>7.2f}",
            flush=True,
        )
    print(f"  {'new query texts':<20}{'':>25}{'search p50':>12}{'p95':>8}{'x':>7}")
    for name, search in entry.get("search_fresh", {}).items():
        print(
            f"  {name:<20}{'':>25}{search['p50_ms']:>12.1f}{search['p95_ms']:>8.1f}"
            f"{search.get('paired_ratio_median') or 1.0:>7.2f}",
            flush=True,
        )
