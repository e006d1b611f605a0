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

_Trim = Callable[[int], int]


def _malloc_trim() -> _Trim | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    found: _Trim = trim
    return found


_TRIM = _malloc_trim()


def release_free_memory() -> bool:
    """Return the heaps' free pages to the system; True when some were (glibc only)."""
    return _TRIM is not None and bool(_TRIM(0))
