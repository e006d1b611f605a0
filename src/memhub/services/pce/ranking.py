"""Seed 000's ranking as pure functions (docs/ranking.md gives the formulas).

text, vector   BM25 and cosine over each side's best candidate (search/fusion.py's
               `by_best` normaliser), in [0, 1]
combined       alpha * vector + (1 - alpha) * text   (one side empty: the other weighs 1)
quality        q in [-1, 1] from feedback;  Q = (1 + q) / 2 when use_quality, else 1
recency        R = 0.5 ** (age_days / half_life_days(kind))
g              Q * R
score          combined * g, in [0, 1]; ties: newer created_at first, then higher id
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from memhub.search.fusion import FusedHit, by_best, normalised

SIGNAL_VALUES = {"helpful": 1.0, "harmful": -1.0, "outdated": -0.6, "duplicate": -0.3}
LEARNING_RATE = 0.3


@dataclass(frozen=True, slots=True)
class Components:
    text: float
    vector: float
    combined: float


scale_by_best = by_best  # the named normaliser of search/fusion.py ("by_best")


def components(hits: Sequence[FusedHit], alpha: float) -> dict[int, Components]:
    """Normalised text and vector scores and their combination for every hit (the hits are
    all of both sides' candidates). One side without hits: the other weighs 1."""
    text = [(h.item_id, h.text_score) for h in hits if h.text_score is not None]
    vector = [(h.item_id, h.vector_score) for h in hits if h.vector_score is not None]
    if not text:
        alpha = 1.0
    elif not vector:
        alpha = 0.0
    t_norm, v_norm = normalised(text, "by_best"), normalised(vector, "by_best")
    out = {}
    for hit in hits:
        t, v = t_norm.get(hit.item_id, 0.0), v_norm.get(hit.item_id, 0.0)
        out[hit.item_id] = Components(t, v, alpha * v + (1.0 - alpha) * t)
    return out


def recency(age_days: float, half_life_days: float) -> float:
    """0.5 ** (age / half-life); the future counts as now."""
    return float(0.5 ** (max(age_days, 0.0) / half_life_days))


def quality_factor(quality: float, use_quality: bool) -> float:
    if not use_quality:
        return 1.0
    return min(1.0, max(0.0, (1.0 + quality) / 2.0))


def g(quality: float, recency_value: float, use_quality: bool) -> float:
    return quality_factor(quality, use_quality) * recency_value


def sort_key(score: float, created_at: str, item_id: int) -> tuple[float, str, int]:
    """Sort ascending by this: score desc, then created_at desc, then id desc."""
    return (-score, _desc(created_at), -item_id)


def _desc(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


def update_quality(quality: float, signal: str, score: float | None) -> float:
    """One feedback step: q <- q + rate * (v - q), v = `score` if given else the signal's value."""
    value = SIGNAL_VALUES[signal] if score is None else score
    return round(min(1.0, max(-1.0, quality + LEARNING_RATE * (value - quality))), 6)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: one token per 4 ASCII characters, one per other character."""
    ascii_chars = sum(1 for c in text if ord(c) < 128)
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)
