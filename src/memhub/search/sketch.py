"""Short sketches of unit vectors for a fast first pass over a large index.

A scan of every row reads every coordinate: 100k x 896 is 90 MB a query even as the index's
int8 codes (358 MB as float32), tens of milliseconds here. A sketch keeps each row's coordinates along the top
principal components of the index (after subtracting the rows' mean), `dims` floats instead
of `dim`. Ranking by `sketch(row) . project(query)` approximates ranking by the cosine:

    query . row = query . mean + query . (row - mean)
                ~ query . mean + project(query) . sketch(row)

and `query . mean` is the same for every row. The index scans the sketches, keeps the best
few thousand rows, scores those from their codes and rescores the best few dozen exactly
(search/vectors.py): the results carry exact cosines, and an item is missed only when its
sketch ranks it below thousands of others.

The sketches are kept as int16 codes with one float32 scale per row (`quantise`, like the
rows' int8 codes): half of float32's bytes, and the pass (`scores`) widens blocks of
`SCAN_BLOCK` rows into a buffer that stays in the CPU's caches. The pass reads memory more
than it computes, so fewer bytes are faster (100k x 128: 26 MB instead of 51, ~30 % less time
here); at 16 bits the codes rank like the float32 sketches (the same kept rows on the
seeded 100k index, docs/benchmarks.md). `best_rows` then picks the rows to keep.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
Codes = npt.NDArray[np.int16]

FIT_SAMPLE = 8192  # rows the components are computed from
FIT_BLOCK = 1024  # of them centred and widened to float64 at a time (7 MB at 896 dims)
SCAN_BLOCK = 4096  # sketch rows widened to float32 at a time by `scores` (2 MB at 128 dims, more
# than a core's L2 here but not the L3: 2,048 rows took ~20 % longer at 100k, docs/benchmarks.md)
SELECT_SAMPLE = 4096  # scores `best_rows` estimates its threshold from
CODE_MAX = 32767.0


class Projection:
    """The mean of the rows and their top principal directions (`dims` of them)."""

    def __init__(self, mean: Matrix, components: Matrix) -> None:
        self.mean = np.ascontiguousarray(mean, dtype=np.float32)
        self.components = np.ascontiguousarray(components, dtype=np.float32)  # (dim, dims)
        self._offset = self.mean @ self.components

    @property
    def dims(self) -> int:
        return int(self.components.shape[1])

    @classmethod
    def fit(cls, rows: Matrix, dims: int, *, seed: int = 0) -> Projection:
        """Principal directions of (a sample of) `rows`; `dims` is capped by the rows' dimension
        and the number of rows sampled."""
        if rows.ndim != 2 or len(rows) < 2:
            raise ValueError("fitting a projection needs at least two rows")
        rng = np.random.default_rng(seed)
        sample = rows if len(rows) <= FIT_SAMPLE else rows[rng.choice(len(rows), FIT_SAMPLE, replace=False)]
        sample = np.asarray(sample, dtype=np.float32)
        mean = sample.mean(axis=0)
        # the principal directions are the right singular vectors of the centred sample, and so
        # the eigenvectors of its Gram matrix (dim x dim, summed in float64 a block at a time):
        # an SVD of the sample itself took ~270 MiB of workspace at 8,192 x 896 (the peak of a
        # 100k server's first load) and 1.7 s, the Gram matrix +7 MiB and 0.26 s, the same
        # directions to a cosine of 1 - 4e-9 (docs/benchmarks.md)
        dim = sample.shape[1]
        gram = np.zeros((dim, dim), dtype=np.float64)
        for start in range(0, len(sample), FIT_BLOCK):
            block = (sample[start : start + FIT_BLOCK] - mean).astype(np.float64)
            gram += block.T @ block
        _, vectors = np.linalg.eigh(gram)  # eigenvalues ascending: the last columns lead
        keep = max(1, min(dims, dim, len(sample)))
        return cls(mean, vectors[:, ::-1][:, :keep])

    def rows(self, matrix: Matrix) -> Matrix:
        """Sketches of `matrix`'s rows: (matrix - mean) @ components, without a centred copy."""
        out: Matrix = np.asarray(matrix @ self.components, dtype=np.float32)
        out -= self._offset
        return out

    def query(self, vector: Matrix) -> Matrix:
        out: Matrix = np.asarray(vector @ self.components, dtype=np.float32)
        return out


def quantise(sketches: Matrix) -> tuple[Codes, Matrix]:
    """int16 codes and per-row scales with `sketches ~ scales[:, None] * codes` (a zero row, or
    one so small its scale is subnormal, gets codes 0)."""
    scales = (np.abs(sketches).max(axis=1) / CODE_MAX).astype(np.float32)
    inverse = np.divide(1.0, scales, out=np.zeros_like(scales), where=scales > np.finfo(np.float32).tiny)
    codes = np.rint(sketches * inverse[:, None]).astype(np.int16)
    return codes, scales


def widened_dot(
    codes: npt.NDArray[Any], query: Matrix, n: int, block: int, rows: npt.NDArray[np.intp] | None = None
) -> Matrix:
    """`codes[:n] @ query` (or `codes[rows] @ query`, `n = len(rows)`) with the integer codes
    widened to float32 `block` rows at a time into one buffer that stays in cache: a float32
    copy of every row at once costs more in memory traffic than the products. `query` may be
    a matrix (one query a column): each block is widened once for them all."""
    out = np.empty((n, *query.shape[1:]), dtype=np.float32)
    buffer = np.empty((min(block, n), codes.shape[1]), dtype=np.float32)
    for start in range(0, n, block):
        end = min(n, start + block)
        widened = buffer[: end - start]
        widened[...] = codes[start:end] if rows is None else codes[rows[start:end]]
        np.matmul(widened, query, out=out[start:end])
    return out


def scores(codes: Codes, scales: Matrix, count: int, query: Matrix) -> Matrix:
    """`sketch(row) . query` for the first `count` rows, from their codes."""
    out = widened_dot(codes, query, count, SCAN_BLOCK)
    out *= scales[:count]
    return out


def best_rows(scores: Matrix, keep: int) -> npt.NDArray[np.intp]:
    """Positions of the `keep` highest `scores`, ascending: the rows a sketch pass keeps (which
    of several equal scores at the cut is kept is arbitrary, as with `np.argpartition`; a NaN
    score, which only a stored vector holding NaN or inf gives, is dropped by the sampled path
    below and kept by the partition of every score).

    Partitioning all 100k scores took ~0.5-0.75 ms here; instead a strided sample of
    `SELECT_SAMPLE` scores gives a threshold a little below the keep-th best (half again as
    many sampled scores above it as the share kept, and 64 more), and only the few thousand
    scores above it are partitioned: ~0.1-0.2 ms. Should the sample misjudge and fewer than
    `keep` pass, every score is partitioned."""
    n = len(scores)
    if keep <= 0:
        return np.zeros(0, dtype=np.intp)
    if keep >= n:
        return np.arange(n)
    if n >= 4 * SELECT_SAMPLE:
        sample = scores[:: n // SELECT_SAMPLE]
        m = len(sample)
        rank = min(m, keep * m * 3 // (2 * n) + 64)
        threshold = np.partition(sample, m - rank)[m - rank]
        above = np.flatnonzero(scores >= threshold)
        if len(above) >= keep:
            chosen = above[np.argpartition(scores[above], len(above) - keep)[len(above) - keep :]]
            chosen.sort()
            return chosen
    chosen = np.argpartition(scores, n - keep)[n - keep :]
    chosen.sort()
    return chosen
