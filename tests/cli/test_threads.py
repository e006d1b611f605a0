"""The server process's numpy runs its products on one BLAS thread (cli/main.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import ctypes
import memhub.cli.main  # the server's entry point, as `memhub serve` imports it
import numpy
maps = open("/proc/self/maps").read().splitlines()
libs = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
counts = []
for path in libs:
    lib = ctypes.CDLL(path)
    for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads"):
        if hasattr(lib, name):
            counts.append(getattr(lib, name)())
            break
print(counts)
"""


def _threads(env: dict[str, str]) -> list[int]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    clean["PYTHONPATH"] = src + os.pathsep + clean.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return [int(n) for n in out.stdout.strip().strip("[]").split(",") if n.strip()]


def test_the_server_runs_blas_on_one_thread_unless_told_otherwise() -> None:
    counts = _threads({})
    if not counts:
        pytest.skip("this numpy has no OpenBLAS (another BLAS, or none): nothing to limit")
    assert counts == [1] * len(counts)
    if len(os.sched_getaffinity(0)) > 1:  # an explicit choice is kept (OpenBLAS caps it at the CPUs)
        assert _threads({"OPENBLAS_NUM_THREADS": "2"}) == [2] * len(counts)
