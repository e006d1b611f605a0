"""The sketch pass of a large VectorIndex: same answers as the exact scan, exact cosines,
a full scan when the filter rejects the sketch's candidates, sketches kept through updates,
deletes and refits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from tests.store.backends import Backend

from memhub.core.errors import MemhubError
from memhub.search import sketch
from memhub.search.sketch import Projection
from memhub.search.vectors import VectorIndex
from memhub.services.assoc import search as assoc_search
from memhub.store.base import Store

DIM, RANK = 16, 5
EMB = f"sketch-test/{DIM}"
AddItem = Callable[..., int]
Vectors = npt.NDArray[np.float32]


def low_rank(rng: np.random.Generator, n: int) -> Vectors:
    """Unit vectors spanning a RANK-dimensional subspace: a sketch of RANK dims ranks them exactly."""
    basis = np.linalg.qr(np.random.default_rng(99).normal(size=(DIM, RANK)))[0]
    rows = (rng.normal(size=(n, RANK)) @ basis.T).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def put(store: Store, item_id: int, vec: Vectors) -> None:
    with store.transaction(write=True) as tx:
        tx.put_vector(item_id, EMB, np.asarray(vec, dtype="<f4").tobytes(), DIM)


def sketched(store: Store, **extra: int) -> VectorIndex:
    options = {"approx_min": 40, "sketch_dims": RANK, "rerank_min": 8, **extra}
    return VectorIndex(store, EMB, DIM, rerank_share=0.05, **options)


def exact(store: Store) -> VectorIndex:
    return VectorIndex(store, EMB, DIM, approx_min=10**9)


def test_projection_of_full_rank_reproduces_centred_dot_products() -> None:
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(50, 6)).astype(np.float32)
    projection = Projection.fit(rows, dims=6)
    query = rng.normal(size=6).astype(np.float32)
    centred = (rows - rows.mean(axis=0)) @ query
    assert projection.rows(rows) @ projection.query(query) == pytest.approx(centred, abs=1e-4)
    assert Projection.fit(rows, dims=99).dims == 6  # capped by the data
    with pytest.raises(ValueError):
        Projection.fit(rows[:1], dims=2)


def test_projection_finds_the_principal_directions_of_a_sample_larger_than_a_block() -> None:
    """The components are the centred sample's leading right singular vectors, best first
    (up to sign), from a Gram matrix summed over several blocks of rows."""
    rng = np.random.default_rng(11)
    n, dim = 2 * sketch.FIT_BLOCK + 77, 24
    spread = np.linspace(3.0, 0.1, dim)  # distinct variances: each direction well defined
    basis = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
    rows = ((rng.normal(size=(n, dim)) * spread) @ basis.T + 5.0).astype(np.float32)
    projection = Projection.fit(rows, dims=8)
    _, _, vt = np.linalg.svd(rows - rows.mean(axis=0), full_matrices=False)
    agreement = np.abs(np.sum(projection.components * vt[:8].T, axis=0))
    assert agreement == pytest.approx(np.ones(8), abs=1e-4)
    assert Projection.fit(rows[:5], dims=8).dims == 5  # no more directions than rows


def test_sketch_codes_score_like_the_float32_sketches_across_blocks() -> None:
    rng = np.random.default_rng(5)
    rows = rng.normal(size=(sketch.SCAN_BLOCK + 300, 8)).astype(np.float32)  # two blocks
    rows[7] = 0.0  # a zero row: scale 0, score 0
    codes, scales = sketch.quantise(rows)
    assert codes.dtype == np.int16 and scales[7] == 0.0
    query = rng.normal(size=8).astype(np.float32)
    got = sketch.scores(codes, scales, len(rows) - 5, query)  # only the first `count` rows
    assert got.shape == (len(rows) - 5,)
    assert got == pytest.approx((rows @ query)[: len(rows) - 5], abs=1e-3)
    assert got[7] == 0.0


def _argpartition_best(scores: Vectors, keep: int) -> npt.NDArray[np.intp]:
    return np.sort(np.argpartition(scores, len(scores) - keep)[len(scores) - keep :])


@pytest.mark.parametrize("n", [10, 4 * sketch.SELECT_SAMPLE - 1, 4 * sketch.SELECT_SAMPLE, 100_003])
def test_best_rows_are_the_highest_scores_in_memory_order(n: int) -> None:
    rng = np.random.default_rng(n)
    scores = rng.normal(size=n).astype(np.float32)
    assert len(sketch.best_rows(scores, 0)) == 0
    for keep in sorted({1, 7, n // 50 + 1, n // 4, n - 1, n, n + 5}):
        got = sketch.best_rows(scores, keep)
        assert np.array_equal(got, _argpartition_best(scores, min(keep, n)) if keep < n else np.arange(n))


def test_best_rows_when_the_sample_misjudges_the_threshold() -> None:
    n, keep = 20_000, 5_000
    step = n // sketch.SELECT_SAMPLE
    scores = np.linspace(0.0, 1.0, n, dtype=np.float32)[::-1].copy()
    high = scores.copy()
    high[::step] += 10.0  # the sampled rows are the best: too few pass the sample's threshold
    low = scores.copy()
    low[::step] -= 10.0  # the sampled rows are the worst: nearly every row passes it
    for case in (scores, high, low):
        assert np.array_equal(sketch.best_rows(case, keep), _argpartition_best(case, keep))


def test_a_row_too_small_for_a_normal_scale_gets_codes_zero() -> None:
    rows = np.full((3, 4), 1e-36, dtype=np.float32)  # max / 32767 is a subnormal float32
    rows[1] = 0.5
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow is the point
        codes, scales = sketch.quantise(rows)
    assert not codes[0].any() and not codes[2].any() and codes[1].max() == sketch.CODE_MAX
    assert np.isfinite(scales).all()


def filled(store: Store, add_item: AddItem, rng: np.random.Generator, n: int) -> list[int]:
    """n items with low-rank vectors."""
    items = [add_item(f"m{i}") for i in range(n)]
    for item, vec in zip(items, low_rank(rng, n), strict=True):
        put(store, item, vec)
    return items


def test_sketched_search_equals_the_exact_scan(store: Store, add_item: AddItem) -> None:
    rng = np.random.default_rng(1)
    filled(store, add_item, rng, 300)
    fast, slow = sketched(store), exact(store)
    fast.refresh(), slow.refresh()
    assert fast._projection is not None and slow._projection is None
    for query in low_rank(rng, 20):
        got, want = fast.search(query, 10), slow.search(query, 10)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)  # exact cosines


def test_a_vector_with_a_non_finite_value_ranks_as_a_zero_vector_and_stops_nothing(
    store: Store, add_item: AddItem, backend: Backend
) -> None:
    """A stored vector holding NaN or infinity (a damaged file, a faulty model) must not stop
    the index's refresh (the sketch's fit) nor give NaN scores: it is a zero vector."""
    rng = np.random.default_rng(4)
    filled(store, add_item, rng, 100)
    broken = [add_item("nan"), add_item("inf")]
    if backend.name != "sqlite":  # pgvector refuses such a vector: it is never stored there
        with pytest.raises(MemhubError):
            put(store, broken[0], np.full(DIM, np.nan, dtype=np.float32))
        return
    put(store, broken[0], np.full(DIM, np.nan, dtype=np.float32))
    put(store, broken[1], np.where(np.arange(DIM) == 0, np.inf, 0.0).astype(np.float32))
    for index in (sketched(store), exact(store)):
        index.refresh()
        for query in low_rank(rng, 5):
            hits = index.search(query, 200)
            assert len(hits) == 102 and all(np.isfinite(score) for _, score in hits)
            assert {item: score for item, score in hits if item in broken} == {item: 0.0 for item in broken}


def test_a_filter_rejecting_the_sketch_candidates_falls_back_to_every_row(
    store: Store, add_item: AddItem
) -> None:
    rng = np.random.default_rng(2)
    items = filled(store, add_item, rng, 400)
    fast, slow = sketched(store), exact(store)
    fast.refresh(), slow.refresh()
    rare = set(items[::97])  # 5 admitted rows: the sketch keeps 20 candidates, rarely these
    offered: list[int] = []

    def admit(ids: list[int]) -> set[int]:
        offered.extend(ids)
        return rare & set(ids)

    query = low_rank(rng, 1)[0]
    assert fast.search(query, 5, admit) == slow.search(query, 5, admit)
    offered.clear()
    assert {i for i, _ in fast.search(query, 5, admit)} == rare
    assert len(offered) == len(set(offered))  # the scan of every row asked only about new rows


def test_sketches_follow_updates_deletes_and_refits(
    store: Store, add_item: AddItem, delete_item: Callable[[int], None]
) -> None:
    rng = np.random.default_rng(4)
    fast, slow = sketched(store, initial_capacity=8), exact(store)
    items = [add_item(f"m{i}") for i in range(200)]
    alive: list[int] = []
    for round_ in range(5):  # 40 new rows a round, a few deleted: fitted, then refitted
        for item, vec in zip(items[round_ * 40 : (round_ + 1) * 40], low_rank(rng, 40), strict=True):
            put(store, item, vec)
            alive.append(item)
        for item in rng.choice(alive, 5, replace=False):  # updates
            put(store, int(item), low_rank(rng, 1)[0])
        for item in rng.choice(alive, 3, replace=False):  # deletes: the last row moves into the hole
            delete_item(int(item))
            alive.remove(int(item))
        fast.refresh(), slow.refresh()
        assert len(fast) == len(alive)
        for query in low_rank(rng, 5):
            assert [i for i, _ in fast.search(query, 8)] == [i for i, _ in slow.search(query, 8)]
    assert fast._fitted_at > 100  # refitted as the index doubled


def test_diversity_reads_a_non_finite_stored_vector_as_redundant_with_nothing(
    store: Store, add_item: AddItem, backend: Backend
) -> None:
    """`memory(search)`'s diversity step reads the stored vectors of its best results: one
    holding NaN (SQLite stores what it is given) must not turn the scores into NaN or zeros."""
    if backend.name != "sqlite":
        pytest.skip("pgvector refuses such a vector (the test above)")
    embedder, dim = "e5+use-test/8", 8
    rng = np.random.default_rng(6)
    items = [add_item(f"m{i}") for i in range(6)]
    vectors = [rng.normal(size=dim).astype(np.float32) for _ in items]
    vectors[1] = np.full(dim, np.nan, dtype=np.float32)
    with store.transaction(write=True) as tx:
        for item, vec in zip(items, vectors, strict=True):
            tx.put_vector(item, embedder, (vec / np.linalg.norm(vec)).astype("<f4").tobytes(), dim)
    scored = [(1.0 - 0.1 * n, 0.9, item) for n, item in enumerate(items)]
    weights = dict.fromkeys(items, 1.0)
    with store.transaction(write=False) as tx:
        top = assoc_search._diverse(tx, scored, weights, embedder, dim, 5, None)
    assert all(np.isfinite(value) and value > 0 for value, _, _ in top)
    assert top[:2] == scored[:2]  # the damaged one keeps its place: redundant with nothing
