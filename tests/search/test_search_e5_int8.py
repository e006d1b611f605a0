"""e5's int8 graph on ONNX Runtime: its vectors against the 4-bit graph's, one text a run, the fallback."""

from __future__ import annotations

import logging

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
    fast, reference = E5Embedder(graph=graph), E5Embedder(graph="q4")  # type: ignore[arg-type]
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

    reference = E5Embedder(graph="q4").embed_queries(TEXTS[:3])
    monkeypatch.setattr(e5_onnx, "INT8_OP", "NoSuchMatMul")  # an operator no build registers
    embedder = E5Embedder(graph="int8")
    with caplog.at_level(logging.WARNING, logger="memhub.search.embedders.e5"):
        vectors = embedder.embed_queries(TEXTS[:3])
        embedder.embed_passages(TEXTS[:3])
    assert embedder.runtime == "onnx" and embedder.graph == "q4"
    assert np.array_equal(vectors, reference)
    warnings = [record.getMessage() for record in caplog.records if "graph" in record.getMessage()]
    assert len(warnings) == 1 and "int8" in warnings[0] and "NoSuchMatMul" in warnings[0]
    twin = embedder.twin()  # the indexer shares the encoder that runs, and says which
    twin.load()
    assert twin._model is embedder._model and twin.graph == "q4"


def test_graphs_are_named_and_twins_keep_theirs() -> None:
    with pytest.raises(ValueError, match="graph"):
        E5Embedder(graph="fp16")  # type: ignore[arg-type]
    assert E5Embedder(graph="mixed").twin().graph == "mixed"
    assert graph_options("q4").int8 is False
    assert graph_options("int8").int8 is True and graph_options("int8").q4_matrices == ()
    assert graph_options("mixed").q4_matrices == ("fo",)
