"""The services' entry to the one retrieval pipeline: settle, then gather and rerank in one snapshot.

Every hybrid search of a toolset (pce's boundary-first search, assoc's memory search,
decisions' graph-first search, the dashboard's search box) calls `retrieve`:

1. settle: read your writes (`Call.catch_up`): wait briefly for this process's pending
   vectors, or learn the note saying what the search may miss;
2. in ONE read snapshot (search/engine.py `SearchEngine.run`): the viewer (the store's one
   visibility filter, per toolset: sessions, boundary classes), the keyword side (BM25 under
   its row budget), the vector side beside it (the query embedding, the index's search, in a
   second transaction of the same snapshot where the store gives one: `Store.read_pair`), the
   fusion (search/fusion.py), then the toolset's own rerank in the first transaction.

A toolset keeps only its rerank (its `ranking.py`); `explain` (search/explain.py) records
what each stage computed, so the dashboard's explanations are the tools' own numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from memhub.core.errors import ErrorKind, MemhubError
from memhub.core.models import Viewer
from memhub.search.explain import Explanation
from memhub.search.fusion import FusionMethod
from memhub.search.pipeline import Candidates
from memhub.services.runtime import Call
from memhub.store.base import Tx

T = TypeVar("T")


async def retrieve(
    call: Call,
    query: str,
    viewer: Callable[[Tx], Viewer],
    rerank: Callable[[Tx, Candidates], T],
    *,
    pending: str,
    kinds: Sequence[str],
    project_id: int | None = None,
    k_txt: int = 50,
    k_vec: int = 50,
    k_final: int = 10,
    alpha: float = 0.5,
    method: FusionMethod = "linear",
    explain: Explanation | None = None,
) -> tuple[T, str | None]:
    """(what `rerank` returned, the note on what the search may have missed). `pending`: the
    note to give when this process's writes are not embedded yet."""
    engine = call.runtime.search
    if engine is None:
        raise MemhubError(ErrorKind.UNAVAILABLE, "search is not configured on this server")
    note = await call.catch_up(pending)
    result = await engine.run(
        query, viewer, rerank, kinds=kinds, project_id=project_id, k_txt=k_txt, k_vec=k_vec,
        k_final=k_final, alpha=alpha, method=method, explain=explain,
    )  # fmt: skip
    call.check_deadline()
    return result, note
