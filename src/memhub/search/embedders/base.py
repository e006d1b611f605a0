"""The embedder contract shared by every backend, and the text/array hygiene they all apply.

An embedder turns texts into float32 rows of unit length, so cosine similarity is a dot
product. `id` names the model *and* its dimension (`"e5-small-q4/384"`): vectors are stored
per embedder id, so switching models never mixes incompatible vectors.

Backends are cheap to construct: the heavy library is imported and the model loaded by
`load()` (or on first use), which raises `EmbedderUnavailable` when the optional package
is not installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeAlias

import numpy as np
import numpy.typing as npt

from memhub.core.errors import ErrorKind, MemhubError

Matrix: TypeAlias = npt.NDArray[np.float32]


class Embedder(Protocol):
    """A sentence embedder. Implementations are used from one thread at a time."""

    @property
    def id(self) -> str:
        """Stable name of model and dimension, e.g. `"e5-small-q4/384"`: the key vectors are stored under."""
        ...

    @property
    def dim(self) -> int: ...

    def load(self) -> None:
        """Load the model now (idempotent). Raises EmbedderUnavailable when it cannot be loaded."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        """Documents to index: float32 (len(texts), dim), L2-normalised rows."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        """Search queries: float32 (len(texts), dim), L2-normalised rows."""
        ...


class EmbedderUnavailable(MemhubError):
    """The embedding model cannot be used (its optional package is missing or failed to load)."""

    def __init__(self, message: str, *, extra: str | None = None) -> None:
        if extra:
            message = f"{message}; install it with: pip install 'memhub[{extra}]'"
        super().__init__(ErrorKind.UNAVAILABLE, message, extra=extra)


def clean_text(text: str) -> str:
    """Text any backend can encode: surrogate pairs joined, lone surrogates U+FFFD, NUL a space."""
    if not text.isascii():
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text.replace("\x00", " ")


def normalize_rows(matrix: npt.ArrayLike, dim: int) -> Matrix:
    """float32 (n, dim) with unit-length rows; an all-zero row stays zero (it matches nothing)."""
    out = np.array(matrix, dtype=np.float32, copy=True).reshape(-1, dim)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out
