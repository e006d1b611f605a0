"""Two embedders as one: their unit vectors, weighted and concatenated.

With parts `a` (weight w) and `b` (weight 1 - w), a text's vector is
`[sqrt(w) * a(text), sqrt(1 - w) * b(text)]`, unit length again, so the cosine of two such
vectors is `w * cos_a + (1 - w) * cos_b`: one matrix product scores both models, and the
index, the store and the backfill treat the pair like any other embedder.

Why: multilingual-e5-small finds English and same-language Japanese paraphrases, the
multilingual USE crosses languages; together they beat either alone on both evaluation sets
(bench/quality, docs/benchmarks.md).

A query is embedded by both models at once (the second on a helper thread: both engines
release the GIL), so a search waits for the slower model, not for the sum; e5 (~14 ms for a
short query) then hides USE (~5 ms). Passages, the background backfill's work, run one model
after the other and leave the second core to the searches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from memhub.search.embedders.base import Embedder, Matrix


class CombinedEmbedder:
    def __init__(self, first: Embedder, second: Embedder, weight: float, *, name: str) -> None:
        if not 0.0 < weight < 1.0:
            raise ValueError("weight must be strictly between 0 and 1")
        self.first, self.second = first, second
        self.weight = weight
        self._scales = (math.sqrt(weight), math.sqrt(1.0 - weight))
        self._name = name
        self._helper = ThreadPoolExecutor(1, thread_name_prefix="memhub-embed-pair")  # threads start lazily

    def twin(self) -> CombinedEmbedder:
        """Another instance, for a second thread (the indexer): each part's twin
        (search/embedders/factory.py `twin`), sharing what a part can share."""
        from memhub.search.embedders.factory import twin

        first, second = twin(self.first) or self.first, twin(self.second) or self.second
        return CombinedEmbedder(first, second, self.weight, name=self._name)

    def prepare_passages(self) -> None:
        """Each part's (search/embedders/factory.py `prepare_passages`)."""
        from memhub.search.embedders.factory import prepare_passages

        prepare_passages(self.first)
        prepare_passages(self.second)

    def release_idle(self, idle_seconds: float) -> bool:
        """Each part's (search/embedders/factory.py `release_idle`); True if either let go."""
        from memhub.search.embedders.factory import release_idle

        first = release_idle(self.first, idle_seconds)
        return release_idle(self.second, idle_seconds) or first

    @property
    def id(self) -> str:
        return f"{self._name}-{round(self.weight * 100)}/{self.dim}"

    @property
    def dim(self) -> int:
        return self.first.dim + self.second.dim

    def load(self) -> None:
        """Both models at once, the second on the helper thread: much of loading is outside the
        GIL (reading and inflating weights, building the runtime's session), so on two cores
        the pair is ready sooner than one after the other (bench/cold_start.py --search)."""
        second = self._helper.submit(self.second.load)
        try:
            self.first.load()
        finally:
            wait([second])  # no load left running behind a failure
        second.result()

    def _join(self, a: Matrix, b: Matrix) -> Matrix:
        out = np.empty((a.shape[0], self.dim), dtype=np.float32)
        out[:, : self.first.dim] = a * self._scales[0]
        out[:, self.first.dim :] = b * self._scales[1]
        return out

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        return self._join(self.first.embed_passages(texts), self.second.embed_passages(texts))

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        second = self._helper.submit(self.second.embed_queries, texts)
        try:
            first = self.first.embed_queries(texts)
        except BaseException:
            wait([second])  # no work left running behind a failure
            raise
        return self._join(first, second.result())
