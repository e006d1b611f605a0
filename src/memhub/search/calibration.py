"""Calibrated similarity: a raw cosine turned into a 0-1 score that means the same thing for
every embedder, every memory and every pair of languages. Pure functions.

Why: an embedder's cosine has its own scale. multilingual-e5 puts *any* two passages at
0.75-0.9, USE at -0.1-0.6, the default e5+use pair at 0.55-0.8; and a cross-language pair
sits lower than a same-language one even when both are unrelated. A fixed threshold on the
raw cosine (or a rank normalisation that gives every memory's best match 1.0) therefore links
nearly everything.

How: for each embedder we measured, on a calibration corpus (the 140 memories and 142 queries of
bench/data/ja_set.json, disjoint from the association evaluation set bench/data/assoc_pairs.json;
`bench/associations.py calibrate` prints the table), the distribution of cosines of pairs that
are (almost all) unrelated: every pair of memories ("passage" mode, what associations and
`search(type='similar')` compare) and every query with every memory that is not its answer
("query" mode, what `memory(search)` / `search(semantic)` compare), separately for English,
Japanese and cross-language pairs. With that distribution's median `m` and 95th percentile
`p95`:

    z          = (cosine - m) / (p95 - m)       0 = a typical unrelated pair, 1 = the top 5 %
    similarity = 1 - exp(-RATE * z) for z > 0, else 0,   RATE = -ln(1 - 0.7)

so similarity 0.7 means "more alike than 95 % of unrelated pairs", 0.9 is z = 1.9 (beyond the
top 1 % of unrelated pairs of memories), and the
score keeps rising (never clipped at 1) for ever closer pairs: strengths stay comparable
across memories and embedders. Unknown embedders fall back to the clipped raw cosine.

Two memories (`pair_similarity`: associations, `search(type='similar')`) are scored per model
when the embedder is a combination: the stored e5+use vector is `[sqrt(.75)·e5, sqrt(.25)·use]`,
so each model's cosine is read off its slice, turned into its own z against that model's
unrelated pairs of the same language pair, and the z's are mixed with ASSOCIATION_WEIGHTS
(USE 0.7, e5 0.3: for two memories USE carries the signal, chosen on the calibration half of
bench/data/assoc_pairs.json). The mix is calibrated once more against its own unrelated pairs
(PAIR_BASELINES, measured on bench/data/ja_set.json), so 0.7 still means "more alike than 95 %
of unrelated pairs of memories". When the two texts are known, the words they share count too
(LEXICAL_WEIGHT x the Dice overlap of their content terms, `overlap`): identifiers, numbers and
names the embedders blur ("V42", "pg_dump", "429") tie two facets of one subject together,
across languages too; the mix's baselines are measured with that term.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np
import numpy.typing as npt

from memhub.core.text import STOPWORDS, cjk_chars, index_terms
from memhub.search.embedders.base import Embedder
from memhub.search.embedders.combined import CombinedEmbedder

Mode = Literal["query", "passage"]
Language = Literal["en", "ja"]
LanguagePair = Literal["en", "ja", "cross", "any"]

AT_P95 = 0.7  # the similarity of a pair exactly at the unrelated 95th percentile
RATE = -math.log(1.0 - AT_P95)
JA_SHARE = 0.2  # share of CJK characters (of the letters) from which a text counts as Japanese


@dataclass(frozen=True, slots=True)
class Baseline:
    """The cosine distribution of unrelated pairs: its median and 95th percentile."""

    median: float
    p95: float


# embedder id prefix -> (mode, language pair) -> baseline; the first matching prefix wins, so
# "e5+use" comes before "e5". Measured by `bench/associations.py calibrate` on bench/data/ja_set.json.
BASELINES: dict[str, dict[tuple[Mode, LanguagePair], Baseline]] = {
    "e5+use": {
        ("passage", "en"): Baseline(0.641, 0.705),
        ("passage", "ja"): Baseline(0.663, 0.720),
        ("passage", "cross"): Baseline(0.614, 0.677),
        ("passage", "any"): Baseline(0.639, 0.707),
        ("query", "en"): Baseline(0.603, 0.657),
        ("query", "ja"): Baseline(0.618, 0.672),
        ("query", "cross"): Baseline(0.585, 0.638),
        ("query", "any"): Baseline(0.601, 0.660),
    },
    "e5": {
        ("passage", "en"): Baseline(0.820, 0.862),
        ("passage", "ja"): Baseline(0.848, 0.882),
        ("passage", "cross"): Baseline(0.787, 0.835),
        ("passage", "any"): Baseline(0.820, 0.874),
        ("query", "en"): Baseline(0.784, 0.822),
        ("query", "ja"): Baseline(0.805, 0.838),
        ("query", "cross"): Baseline(0.759, 0.800),
        ("query", "any"): Baseline(0.781, 0.829),
    },
    "use": {
        ("passage", "en"): Baseline(0.105, 0.271),
        ("passage", "ja"): Baseline(0.106, 0.267),
        ("passage", "cross"): Baseline(0.092, 0.248),
        ("passage", "any"): Baseline(0.100, 0.259),
        ("query", "en"): Baseline(0.064, 0.198),
        ("query", "ja"): Baseline(0.060, 0.205),
        ("query", "cross"): Baseline(0.058, 0.196),
        ("query", "any"): Baseline(0.060, 0.200),
    },
    "hash": {
        ("passage", "en"): Baseline(0.061, 0.186),
        ("passage", "ja"): Baseline(0.020, 0.142),
        ("passage", "cross"): Baseline(0.009, 0.118),
        ("passage", "any"): Baseline(0.019, 0.140),
        ("query", "en"): Baseline(0.043, 0.175),
        ("query", "ja"): Baseline(0.000, 0.127),
        ("query", "cross"): Baseline(0.000, 0.109),
        ("query", "any"): Baseline(0.004, 0.130),
    },
}


def language(text: str) -> Language:
    """ "ja" when at least JA_SHARE of the text's letters are CJK (kanji, kana), else "en"."""
    letters = sum(map(str.isalpha, text))  # counted in C: this runs for every memory linked
    if not letters:
        return "en"
    cjk = sum(map(str.isalpha, "".join(cjk_chars(text))))
    return "ja" if cjk >= JA_SHARE * letters else "en"


def language_pair(a: Language, b: Language) -> LanguagePair:
    return a if a == b else "cross"


@cache  # a pure lookup in constant tables, once per search candidate
def baseline(embedder_id: str, mode: Mode, pair: LanguagePair = "any") -> Baseline | None:
    """The unrelated-pair baseline of this embedder, mode and language pair (the pooled "any"
    one when the pair is unknown); None for an embedder that was never calibrated."""
    for prefix, table in BASELINES.items():
        if embedder_id.startswith(prefix):
            return table.get((mode, pair)) or table.get((mode, "any"))
    return None


def from_baseline(cosine: float, base: Baseline) -> float:
    """Similarity 0-1 of a cosine against an unrelated-pair baseline (module docstring)."""
    spread = base.p95 - base.median
    if math.isnan(cosine) or spread <= 0:
        return 0.0
    z = (cosine - base.median) / spread
    return 0.0 if z <= 0 else 1.0 - math.exp(-RATE * z)


def calibrated(embedder_id: str, cosine: float, mode: Mode = "query", pair: LanguagePair = "any") -> float:
    """The calibrated similarity of `cosine` under `embedder_id` (clipped raw cosine if unknown)."""
    base = baseline(embedder_id, mode, pair)
    if base is None:
        return 0.0 if math.isnan(cosine) else max(0.0, min(1.0, cosine))
    return from_baseline(cosine, base)


def cosine_at(embedder_id: str, similarity: float, mode: Mode = "query", pair: LanguagePair = "any") -> float:
    """The inverse: the raw cosine whose calibrated similarity is `similarity` (0 < s < 1)."""
    base = baseline(embedder_id, mode, pair)
    if base is None:
        return similarity
    z = -math.log(1.0 - similarity) / RATE
    return base.median + z * (base.p95 - base.median)


# -- two memories, model by model -------------------------------------------------------------

# each model's share of the z of two memories (the first matching prefix wins), chosen on the
# calibration half of bench/data/assoc_pairs.json (`bench/associations.py offline`): with e5 at
# 0.1-0.5 recall at precision 0.8 is 0.59-0.65 there (within two related pairs), at 0.75 (the
# search index's mix) 0.53, e5 alone 0.47; the held-out half is in docs/benchmarks.md.
ASSOCIATION_WEIGHTS: dict[str, float] = {"e5": 0.3, "use": 0.7}

# added to the mixed z of two memories, times the Dice overlap of their content terms (0-1), when
# both texts are known; chosen on the calibration half of bench/data/assoc_pairs.json
# (`bench/associations.py offline`: recall at precision 0.8 there 0.63 without it, 0.71 at 1-3,
# 0.73 at 4, 0.71 at 5); the held-out half is in docs/benchmarks.md.
LEXICAL_WEIGHT = 4.0

# the mixed z of unrelated pairs of memories (e5 0.3 + USE 0.7 + LEXICAL_WEIGHT x overlap), its
# median and 95th percentile per language pair: `bench/associations.py calibrate` on
# bench/data/ja_set.json.
PAIR_BASELINES: dict[tuple[str, ...], dict[LanguagePair, Baseline]] = {
    ("e5", "use"): {
        "en": Baseline(0.018, 1.073),
        "ja": Baseline(0.069, 1.102),
        "cross": Baseline(0.021, 0.924),
        "any": Baseline(0.042, 1.015),
    },
}


def terms(text: str) -> frozenset[str]:
    """A text's content terms as the full-text index sees them (Latin words, CJK bigrams),
    without stop words and single characters."""
    return frozenset(t for t in index_terms(text) if len(t) > 1 and t not in STOPWORDS)


def overlap(text_a: str | frozenset[str], text_b: str | frozenset[str]) -> float:
    """Dice overlap of two texts' content terms (or of their `terms`, computed once for a text
    compared with many): 0 (none shared) to 1 (the same terms)."""
    a = terms(text_a) if isinstance(text_a, str) else text_a
    b = terms(text_b) if isinstance(text_b, str) else text_b
    return 2 * len(a & b) / (len(a) + len(b)) if a or b else 0.0


@dataclass(frozen=True, slots=True)
class Profile:
    """What scoring two memories reads from a text: its language and its content terms."""

    language: Language
    terms: frozenset[str]


TERMS_KEPT = 100_000  # the profiles kept hold this many terms at most (~10 MiB)...
PROFILE_KEPT_CHARS = 1000  # ...of texts this long at most (longer ones are profiled every time)


def profile(text: str) -> Profile:
    """A text's language and content terms; remembered for the texts asked for last (each new
    memory is scored against ~20 older ones, so the backfill asks for the same few hundred
    texts batch after batch), as many as hold TERMS_KEPT terms in all: the memo's size is
    bounded by what it holds, not by a count of texts (1,000 characters of Japanese are ~1,000
    terms; a typical note 20)."""
    if len(text) > PROFILE_KEPT_CHARS:
        return _profile(text)
    return _PROFILES.get(text) or _PROFILES.put(text, _profile(text))


def _profile(text: str) -> Profile:
    return Profile(language(text), terms(text))


class _Memo:
    """The profiles of the texts asked for last, as many as hold `terms` terms in all (each
    text counts one more). Asked from the event loop and from worker threads: locked."""

    def __init__(self, terms: int) -> None:
        self.budget = terms
        self.held = 0
        self.kept: OrderedDict[str, Profile] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, text: str) -> Profile | None:
        with self.lock:
            found = self.kept.get(text)
            if found is not None:
                self.kept.move_to_end(text)
            return found

    def put(self, text: str, made: Profile) -> Profile:
        with self.lock:
            if text not in self.kept:
                self.kept[text] = made
                self.held += len(made.terms) + 1
                while self.held > self.budget:
                    self.held -= len(self.kept.popitem(last=False)[1].terms) + 1
        return made


_PROFILES = _Memo(TERMS_KEPT)


Vector = npt.NDArray[np.float32]
Matrix = npt.NDArray[np.float32]  # rows of stored vectors


@dataclass(frozen=True, slots=True)
class Part:
    """One model's slice of a stored vector: [start, stop) holds sqrt(weight) x its unit vector."""

    embedder_id: str
    start: int
    stop: int
    weight: float = 1.0


def parts(embedder: Embedder) -> tuple[Part, ...]:
    """The models a vector of `embedder` is made of (one part for a single model)."""
    if isinstance(embedder, CombinedEmbedder):
        first, second, cut = embedder.first, embedder.second, embedder.first.dim
        return (
            Part(first.id, 0, cut, embedder.weight),
            Part(second.id, cut, embedder.dim, 1.0 - embedder.weight),
        )
    return (Part(embedder.id, 0, embedder.dim),)


def stacked(ids: Sequence[int], blobs: Mapping[int, bytes], dim: int) -> tuple[list[int], Matrix]:
    """The ids of `ids` whose stored vector in `blobs` is sound, and those vectors as the rows
    of one matrix, in that order. A blob of another length than `dim` float32s, or holding NaN
    or infinity (a damaged file, a faulty model), is left out: every reader of stored vectors
    comes here, so none scores with one."""
    kept = [i for i in ids if len(blobs.get(i, b"")) == 4 * dim]
    matrix = np.frombuffer(b"".join(blobs[i] for i in kept), dtype="<f4").reshape(-1, dim)
    finite = np.isfinite(matrix).all(axis=1)
    if finite.all():
        return kept, matrix
    return [i for i, sound in zip(kept, finite, strict=True) if sound], matrix[finite]


def _prefix(embedder_id: str, prefixes: Iterable[str]) -> str | None:
    return next((prefix for prefix in prefixes if embedder_id.startswith(prefix)), None)


def part_cosines(layout: Sequence[Part], a: Vector, b: Vector) -> list[float]:
    """Each model's own cosine of two stored vectors."""
    return [float(cos[0]) for cos in _part_cosines(layout, a, b[None, :])]


def _part_cosines(layout: Sequence[Part], a: Vector, others: Matrix) -> list[npt.NDArray[np.float64]]:
    """Each model's own cosines of `a` and each row of `others`: one matrix product a model."""
    return [(others[:, p.start : p.stop] @ a[p.start : p.stop]).astype(np.float64) / p.weight for p in layout]


def mixed_z(
    layout: Sequence[Part], a: Vector, b: Vector, pair: LanguagePair = "any", shared: float = 0.0
) -> float | None:
    """`mixed_zs` of one pair of memories."""
    z = mixed_zs(layout, a, b[None, :], (pair,), (shared,))
    return None if z is None else float(z[0])


def mixed_zs(
    layout: Sequence[Part],
    a: Vector,
    others: Matrix,
    pairs: Sequence[LanguagePair],
    shared: Sequence[float],
) -> npt.NDArray[np.float64] | None:
    """For `a` and each row of `others` (its language pair `pairs[i]`, the texts' `overlap`
    `shared[i]`): each model's z (its cosine against its own unrelated pairs of memories of
    that language pair) mixed by ASSOCIATION_WEIGHTS, plus LEXICAL_WEIGHT x the overlap for a
    combination of models; 0 where a cosine is NaN or a baseline's spread is not positive.
    None when a model was never calibrated."""
    names = [name for p in layout if (name := _prefix(p.embedder_id, BASELINES)) is not None]
    if len(names) < len(layout):
        return None
    count = len(pairs)
    z = np.zeros(count)
    broken = np.zeros(count, dtype=bool)
    total = 0.0
    for name, cos in zip(names, _part_cosines(layout, a, others), strict=True):
        bases = [_passage_baseline(name, pair) for pair in pairs]
        median = np.fromiter((base.median for base in bases), dtype=np.float64, count=count)
        spread = np.fromiter((base.p95 - base.median for base in bases), dtype=np.float64, count=count)
        broken |= np.isnan(cos) | (spread <= 0)
        weight = ASSOCIATION_WEIGHTS.get(name, 1.0)
        z += weight * (cos - median) / np.where(spread > 0, spread, 1.0)
        total += weight
    z /= total
    if len(layout) > 1:
        z += LEXICAL_WEIGHT * np.asarray(shared, dtype=np.float64)
    z[broken] = 0.0
    return z


def _passage_baseline(name: str, pair: LanguagePair) -> Baseline:
    return BASELINES[name].get(("passage", pair)) or BASELINES[name][("passage", "any")]


def pair_similarity(
    layout: Sequence[Part], a: Vector, b: Vector, pair: LanguagePair = "any", shared: float = 0.0
) -> float:
    """`pair_similarities` of one pair of memories."""
    return pair_similarities(layout, a, b[None, :], (pair,), (shared,))[0]


def pair_similarities(
    layout: Sequence[Part],
    a: Vector,
    others: Matrix,
    pairs: Sequence[LanguagePair],
    shared: Sequence[float],
) -> list[float]:
    """The calibrated similarity of the stored vector `a` and each row of `others` (module
    docstring): each model's z against its unrelated pairs of that row's language pair
    `pairs[i]`, mixed by ASSOCIATION_WEIGHTS with the texts' term overlap `shared[i]`,
    calibrated again for the mix (one model: its own passage calibration, no overlap). Falls
    back to the clipped cosine of the whole vectors when a model was never calibrated. One
    matrix product per model for all the rows (the backfill scores ~20 candidates a memory)."""
    z = mixed_zs(layout, a, others, pairs, shared)
    if z is None:
        whole = (others @ a).tolist()
        return [calibrated("", cos, "passage", pair) for cos, pair in zip(whole, pairs, strict=True)]
    names = tuple(_prefix(p.embedder_id, BASELINES) or "" for p in layout)
    mixed = PAIR_BASELINES.get(names) if len(names) > 1 else None
    return [
        from_baseline(value, (mixed.get(pair) or mixed["any"]) if mixed else Baseline(0.0, 1.0))
        for value, pair in zip(z.tolist(), pairs, strict=True)
    ]
