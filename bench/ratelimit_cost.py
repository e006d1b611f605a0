"""What a shared rate limit costs per call: `RateLimiter.take` over the store's buckets
(services/ratelimit.py: one upsert per call) against the in-process bucket.

    .venv/bin/python bench/ratelimit_cost.py [--db sqlite|postgres|URL] [--calls 5000] [--keys 100]

Calls `take` `--calls` times, spread over `--keys` principals, from one thread, and prints
p50/p95/p99 per call in ms for the shared and the in-process limiter; writes
bench/results/ratelimit_cost.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, summary, write_report
from databases import bench_store
from memhub.services.ratelimit import Limit, RateLimiter, SharedBuckets
from memhub.store.open import open_store


def _timed(limiter: RateLimiter, calls: int, keys: int) -> list[float]:
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        limiter.take(f"user{i % keys}", "write")
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="sqlite")
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--out", default=str(RESULTS / "ratelimit_cost.json"))
    args = parser.parse_args()
    limits = {"write": Limit(1_000_000)}
    with tempfile.TemporaryDirectory() as tmp, bench_store(args.db, Path(tmp)) as url:
        store = open_store(url)
        try:
            assert isinstance(store, SharedBuckets)
            shared = RateLimiter(limits, time.time, shared=store)
            _timed(shared, 200, args.keys)  # warm up: connections, first rows
            report = {
                "store": store.backend,
                "calls": args.calls,
                "keys": args.keys,
                "shared": summary(_timed(shared, args.calls, args.keys), 3),
                "in_process": summary(_timed(RateLimiter(limits, time.time), args.calls, args.keys), 3),
            }
        finally:
            store.close()
    for name in ("shared", "in_process"):
        r = report[name]
        print(f"{report['store']:<11}{name:<12}p50 {r['p50_ms']:.3f} ms  p95 {r['p95_ms']:.3f} ms")  # type: ignore[index]
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
