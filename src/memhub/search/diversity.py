"""Diversity in the first results: maximal marginal relevance over the best-scored candidates.

A question about two facts (LoCoMo's multi-hop questions: "What activities does Melanie do?")
needs two memories told in different conversations; the best-scored candidates are often
restatements of one of them (and, with conversation context, the turns around it). So the
first `limit` results are chosen greedily, each time the candidate with the highest

    value(c) = score(c) − penalty · weight(c) · redundancy(c)
    redundancy(c) = max over the results already chosen r of clip((cos(c, r) − floor) / (1 − floor))

where `cos` is the cosine of the two memories' stored vectors, `floor` the embedder's cosine
of two unrelated memories (calibration's passage baseline: 0 redundancy for an unrelated
pair, 1 for identical vectors) and `weight` the candidate's rerank weight (so the penalty is in
the units of its relevance). A memory without a stored vector is redundant with nothing. The
values never increase along the chosen order (redundancy only grows as results are chosen),
so they are returned as the results' scores, clipped at 0 (a weak restatement's value can
fall below it; the score range is [0, 1]). Measured in docs/ranking.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def diversify(
    ranked: Sequence[int],
    scores: Mapping[int, float],
    weights: Mapping[int, float],
    vectors: Mapping[int, np.ndarray],
    floor: float,
    penalty: float,
    limit: int,
) -> list[tuple[int, float, float]]:
    """The first `limit` of `ranked` (best score first) chosen by maximal marginal relevance,
    each as (item, value, redundancy) (module docstring); `penalty` 0 keeps `ranked`'s order
    and scores."""
    pool = list(ranked)
    if penalty <= 0 or floor >= 1.0:
        return [(item, scores[item], 0.0) for item in pool[:limit]]
    n = len(pool)
    value = np.array([scores[item] for item in pool], dtype=np.float64)
    cost = penalty * np.array([weights[item] for item in pool], dtype=np.float64)
    sims = np.zeros((n, n))
    have = [k for k, item in enumerate(pool) if item in vectors]
    if have:
        matrix = np.stack([np.asarray(vectors[pool[k]], dtype=np.float32) for k in have])
        sims[np.ix_(have, have)] = np.clip((matrix @ matrix.T - floor) / (1.0 - floor), 0.0, 1.0)
    redundancy = np.zeros(n)
    left = np.ones(n, dtype=bool)
    chosen: list[tuple[int, float, float]] = []
    for _ in range(min(limit, n)):
        marginal = np.where(left, value - cost * redundancy, -np.inf)
        k = int(np.argmax(marginal))  # ties: the earlier in `ranked` (its own tie-break) wins
        # the score reported: never below 0 (the seed's range); the choice used the unclipped value
        chosen.append((pool[k], max(0.0, float(marginal[k])), float(redundancy[k])))
        left[k] = False
        redundancy = np.maximum(redundancy, sims[k])
    return chosen
