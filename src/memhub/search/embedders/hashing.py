"""A tiny deterministic embedder (numpy only): feature-hashed bag of words and CJK bigrams.

It knows nothing of meaning, only of shared surface forms: Latin words (NFKC, case-folded,
stopwords dropped) plus their character trigrams (so `kubernetes` and a misspelt
`kubernetis` still overlap) and CJK character bigrams, the same pieces the text index uses
(`memhub.core.text`). Term weights are sublinear (1 + log tf); each feature lands in one of
`dim` buckets with a hashed sign, and rows are L2-normalised.

It is the embedder of the test suite and the fallback when no model package is installed.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from memhub.core.text import STOPWORDS, index_text, is_cjk
from memhub.search.embedders.base import Matrix, clean_text, normalize_rows

_VERSION = "hash-v1"
_TRIGRAM_WEIGHT = 0.5  # a shared trigram is weaker evidence than a shared word
_MAX_CHARS = 20_000  # longer texts are cut: the bag is saturated long before


@lru_cache(maxsize=65_536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return digest % dim, (1.0 if (digest >> 63) & 1 else -1.0)


def _features(text: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for token in index_text(clean_text(text)[:_MAX_CHARS]).split():
        if is_cjk(token[0]):
            counts["c:" + token] += 1
            continue
        if token in STOPWORDS:
            continue
        counts["w:" + token] += 1
        if len(token) >= 4:
            padded = f"<{token}>"
            for i in range(len(padded) - 2):
                counts["t:" + padded[i : i + 3]] += 1
    return counts


class HashingEmbedder:
    """Deterministic across processes and platforms (blake2b, not Python's salted `hash`)."""

    def __init__(self, dim: int = 256, *, load_seconds: float = 0.0, passage_seconds: float = 0.0) -> None:
        """`load_seconds`: how long `load` takes and `passage_seconds` how long each passage
        takes, as a real model's would (tests of a server whose model is still loading, or
        that has a backlog it cannot embed at once)."""
        if dim < 8:
            raise ValueError("dim must be at least 8")
        self._dim = dim
        self._load_seconds = load_seconds
        self._passage_seconds = passage_seconds
        self._id = f"{_VERSION}/{dim}"

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return self._dim

    def load(self) -> None:
        if self._load_seconds > 0:
            time.sleep(self._load_seconds)

    def _embed(self, texts: Sequence[str]) -> Matrix:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, count in _features(text).items():
                weight = (1.0 + math.log(count)) * (_TRIGRAM_WEIGHT if feature[0] == "t" else 1.0)
                index, sign = _bucket(feature, self._dim)
                out[row, index] += sign * weight
        return normalize_rows(out, self._dim)

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        if self._passage_seconds > 0:
            time.sleep(self._passage_seconds * len(texts))
        return self._embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        return self._embed(texts)
