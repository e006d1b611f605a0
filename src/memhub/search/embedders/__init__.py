"""Sentence embedders: the `Embedder` protocol, its backends, and `make_embedder` to pick one."""

from memhub.search.embedders.base import Embedder, EmbedderUnavailable, Matrix
from memhub.search.embedders.combined import CombinedEmbedder
from memhub.search.embedders.e5 import E5Embedder
from memhub.search.embedders.factory import EMBEDDER_NAMES, available_embedders, make_embedder
from memhub.search.embedders.hashing import HashingEmbedder
from memhub.search.embedders.use import UseEmbedder

__all__ = [
    "EMBEDDER_NAMES",
    "CombinedEmbedder",
    "E5Embedder",
    "Embedder",
    "EmbedderUnavailable",
    "HashingEmbedder",
    "Matrix",
    "UseEmbedder",
    "available_embedders",
    "make_embedder",
]
