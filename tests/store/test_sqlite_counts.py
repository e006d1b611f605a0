"""The overview's counts: one grouped read of what a viewer may see, from a covering index."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from memhub.core.models import Viewer
from memhub.store.base import ItemQuery, NewItem
from memhub.store.open import open_store
from memhub.store.sql import SQLITE, visible

NOW = "2026-01-01T00:00:00Z"


def test_visible_counts_equal_the_grouped_counts_and_read_only_the_index(tmp_path: Path) -> None:
    store = open_store(tmp_path / "counts.db")
    with store.transaction(write=True) as tx:
        project = tx.insert_project("p", "", {}, "alice").id
        for n in range(40):
            tx.insert_item(
                NewItem(
                    kind=("memory", "claim", "decision")[n % 3], owner=("alice", "bob")[n % 2],
                    scope=("global", "user", "project", "session")[n % 4],
                    project_id=project if n % 4 == 2 else None, session_id="s1" if n % 4 == 3 else None,
                    boundary_class=("public", "internal", "secret")[n % 3], body=f"item {n}",
                    expires_at="2025-01-01T00:00:00Z" if n % 7 == 0 else None,
                )
            )  # fmt: skip
    for viewer in (Viewer("alice", NOW), Viewer("bob", NOW), Viewer("carol", NOW)):
        with store.transaction(write=False) as tx:
            rows = tx.visible_counts(viewer)
            every = ItemQuery(limit=1)
            kinds, scopes = Counter[str](), Counter[str]()
            for kind, scope, _project, n in rows:
                kinds[kind] += n
                scopes[scope] += n
            assert dict(kinds) == tx.group_counts(viewer, every, "kind")
            assert dict(scopes) == tx.group_counts(viewer, every, "scope")
            per_project = Counter[str]()
            for _kind, scope, pid, n in rows:
                if scope == "project":
                    per_project[str(pid)] += n
            grouped = tx.group_counts(viewer, ItemQuery(scopes=("project",), limit=1), "project_id")
            assert dict(per_project) == grouped
            cond, params = visible(viewer, "i", SQLITE)
            plan = tx.conn.execute(  # type: ignore[attr-defined]
                f"EXPLAIN QUERY PLAN SELECT i.kind, i.scope, i.project_id, count(*) FROM items i"
                f" WHERE {cond} GROUP BY 1, 2, 3",
                params,
            ).fetchall()
            assert any("COVERING INDEX items_visible_counts" in str(step[-1]) for step in plan), plan
    store.close()
