"""Giving the heap's free memory back to the system after large transient work.

glibc keeps freed memory in its heaps for reuse, and past its first large frees it serves
blocks up to 32 MiB from the heap instead of fresh mappings, so the temporaries of a big job
(the vector index's first load and sketch fit, a backlog's passage embeddings: tens to
hundreds of MiB) stay in the process's resident memory after the job. `release_free_memory`
asks glibc to return the free pages of every heap (`malloc_trim(0)`: a few ms, off the event
loop). Called after such jobs only, never per search: between them the heap is reused.
Elsewhere than glibc (macOS, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any

_Trim = Callable[[int], int]
_Mallopt = Callable[[int, int], int]
M_ARENA_MAX = -8  # glibc's mallopt parameter
HEAP_ARENAS = 2


def _libc(name: str, argtypes: list[Any], restype: Any) -> Any:
    """glibc's function `name` with its C signature, or None (not Linux, no such function)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    function = getattr(libc, name, None)
    if function is not None:
        function.argtypes, function.restype = argtypes, restype
    return function


_TRIM: _Trim | None = _libc("malloc_trim", [ctypes.c_size_t], ctypes.c_int)
_MALLOPT: _Mallopt | None = _libc("mallopt", [ctypes.c_int, ctypes.c_int], ctypes.c_int)


def release_free_memory() -> bool:
    """Return the heaps' free pages to the system; True when some were (glibc only)."""
    return _TRIM is not None and bool(_TRIM(0))


def limit_heap_arenas(arenas: int = HEAP_ARENAS) -> bool:
    """At most `arenas` glibc heaps for the threads made from now on (M_ARENA_MAX); True
    when set (glibc only). By default glibc gives each new thread a heap of its own, up to 8
    per core: the server's threads (the event loop's workers, the vector side's, the
    indexer's, a model's) each keep their own free memory and their own fragmentation, which
    `malloc_trim` cannot give back where live blocks remain. Python serialises most of their
    allocations (the GIL); ONNX Runtime's activations and SQLite's pages are allocated outside
    it and now share the two heaps (memory.search p50 0.95x at 100k, docs/benchmarks.md: no
    waiting measured). glibc fixes the limit once it has made more heaps than that: call this
    before any thread is started — once, first thing, by the composition root (cli/container.py)."""
    return _MALLOPT is not None and bool(_MALLOPT(M_ARENA_MAX, arenas))
