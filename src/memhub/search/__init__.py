"""The search engine layer: embedders, the embedding service, the vector index, fusion, hybrid search.

Imports `memhub.core` and the `memhub.store` protocols only; services build one of each
object per process and share them.
"""

from memhub.search.backfill import VectorBackfill
from memhub.search.embedders import (
    EMBEDDER_NAMES,
    E5Embedder,
    Embedder,
    EmbedderUnavailable,
    HashingEmbedder,
    UseEmbedder,
    available_embedders,
    make_embedder,
)
from memhub.search.embedding import EmbeddingService
from memhub.search.engine import SearchEngine
from memhub.search.fusion import (
    FUSION_METHODS,
    FusedHit,
    FusionMethod,
    fuse,
    fuse_hits,
    normalize_scores,
    reciprocal_rank_fusion,
)
from memhub.search.vector_search import VectorSearch, vector_search_for
from memhub.search.vectors import VectorFeed, VectorIndex

__all__ = [
    "EMBEDDER_NAMES",
    "FUSION_METHODS",
    "E5Embedder",
    "Embedder",
    "EmbedderUnavailable",
    "EmbeddingService",
    "FusedHit",
    "FusionMethod",
    "HashingEmbedder",
    "SearchEngine",
    "UseEmbedder",
    "VectorBackfill",
    "VectorFeed",
    "VectorIndex",
    "VectorSearch",
    "available_embedders",
    "fuse",
    "fuse_hits",
    "make_embedder",
    "normalize_scores",
    "reciprocal_rank_fusion",
    "vector_search_for",
]
