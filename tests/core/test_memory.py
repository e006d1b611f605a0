"""core/memory.py: glibc's heap, trimmed after big jobs and shared by at most two arenas."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memhub.core import memory

_HEAPS = """
import sys, threading
from memhub.core.memory import limit_heap_arenas
if sys.argv[1] == "limit":
    assert limit_heap_arenas(2)
gate = threading.Barrier(7)
held = []
def work():
    held.append(bytearray(50_000))  # from this thread's arena
    gate.wait()
    gate.wait()
threads = [threading.Thread(target=work) for _ in range(6)]
for thread in threads:
    thread.start()
gate.wait()
heaps = 0
for line in open("/proc/self/maps"):
    start = int(line.split("-")[0], 16)
    heaps += start % (64 << 20) == 0 and len(line.split()) == 5  # an anonymous 64 MiB-aligned region
print(heaps)
gate.wait()
"""


def _heaps(mode: str) -> int:
    src = str(Path(__file__).parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src}
    env.pop("MALLOC_ARENA_MAX", None)
    done = subprocess.run(
        [sys.executable, "-c", _HEAPS, mode], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return int(done.stdout.strip())


@pytest.mark.skipif(memory._MALLOPT is None, reason="glibc's arenas")
def test_threads_share_at_most_two_heaps_once_limited() -> None:
    """By default each new thread that allocates gets a heap of its own (here: six threads, six
    heaps besides the main one); after `limit_heap_arenas(2)` they share one more than the main
    heap, whose free memory and fragmentation no longer multiply with the threads."""
    assert _heaps("default") >= 4
    assert _heaps("limit") <= 1
