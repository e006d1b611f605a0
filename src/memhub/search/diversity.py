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
so they are returned as the results' scores. Measured in docs/ranking.md.
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
    have = [item for item in pool if item in vectors]
    index = {item: i for i, item in enumerate(have)}
    sims = np.zeros((0, 0))
    if have:
        matrix = np.stack([np.asarray(vectors[item], dtype=np.float32) for item in have])
        sims = np.clip((matrix @ matrix.T - floor) / (1.0 - floor), 0.0, 1.0)
    redundancy = dict.fromkeys(pool, 0.0)
    chosen: list[tuple[int, float, float]] = []
    while pool and len(chosen) < limit:
        # ties: the earlier in `ranked` (its own tie-break) wins
        best = max(pool, key=lambda i: scores[i] - penalty * weights[i] * redundancy[i])
        chosen.append((best, scores[best] - penalty * weights[best] * redundancy[best], redundancy[best]))
        pool.remove(best)
        if best in index:
            row = sims[index[best]]
            for item in pool:
                if item in index:
                    redundancy[item] = max(redundancy[item], float(row[index[item]]))
    return chosen
