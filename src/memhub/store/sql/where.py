"""The one `where` builder for listings of items (`ItemQuery`), shared by the SQL backends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memhub.core.models import Viewer
from memhub.store.rows import ItemQuery
from memhub.store.sql.dialect import SQLITE, Dialect
from memhub.store.sql.visibility import visible

FREQUENT_TAG_ROWS = 2_000

TagRows = Callable[[Sequence[str]], int]  # how many item_tags rows carry any of these tags
Sealed = Callable[[Sequence[str], str], list[str]]  # values of a sealed column as stored (value, aad)


def _as_stored(values: Sequence[str], aad: str) -> list[str]:
    return list(values)


def item_where(
    viewer: Viewer,
    query: ItemQuery,
    dialect: Dialect = SQLITE,
    *,
    encrypted: bool = False,
    tag_rows: TagRows | None = None,
    sealed: Sealed = _as_stored,
) -> tuple[str, list[Any]]:
    """The condition (over `items i`) and its parameters: what `viewer` may read, narrowed by
    `query`. `encrypted`: text columns hold ciphertext (substring tests decrypt in SQL).
    `tag_rows` lets a backend with planner hints pick the plan for a tag filter. `sealed` turns
    values of a deterministically encrypted column (category, tags) into their stored form."""
    cond, args = visible(viewer, "i", dialect)
    p = dialect.param
    where = [cond]
    if query.kinds:
        # a content hash names a row or two: keep the planner on its index (SQLite's `+` stops
        # it from walking every row of the kind, ~100 ms at 100k claims)
        kinds = f"i.kind IN ({dialect.placeholders(query.kinds)})"
        where.append(dialect.unindexed(kinds, when=query.content_hash is not None))
        args.extend(query.kinds)
    if query.project_id is not None:
        where.append(f"i.project_id = {p}")
        args.append(query.project_id)
    if query.top_level:
        where.append("i.parent_id IS NULL")
    elif query.parent_id is not None:
        where.append(f"i.parent_id = {p}")
        args.append(query.parent_id)
    if query.min_id is not None:
        where.append(f"i.id >= {p}")
        args.append(query.min_id)
    for term in query.contains:
        where.append(dialect.contains(dialect.plain("i.norm_text", encrypted=encrypted)))
        args.append(term)
    if query.with_child_kind:
        where.append(f"EXISTS (SELECT 1 FROM items c WHERE c.parent_id = i.id AND c.kind = {p})")
        args.append(query.with_child_kind)
    if query.without_child_kind:
        where.append(f"NOT EXISTS (SELECT 1 FROM items c WHERE c.parent_id = i.id AND c.kind = {p})")
        args.append(query.without_child_kind)
    for column, values in (
        ("scope", query.scopes),
        ("category", sealed(query.categories, "category") if query.categories else []),
        ("project_id", query.project_ids),
    ):
        if values:
            where.append(f"i.{column} IN ({dialect.placeholders(values)})")
            args.extend(values)
    if query.ids is not None:
        among, among_args = dialect.among("i.id", query.ids)
        where.append(among)
        args.extend(among_args)
    for column, op, value in (
        ("session_id", "=", query.session_id),
        ("owner", "=", query.owner),
        ("importance", ">=", query.importance_min),
        ("importance", "<=", query.importance_max),
        ("created_at", ">=", query.created_from),
        ("created_at", "<=", query.created_to),
    ):
        if value is not None:
            where.append(f"i.{column} {op} {p}")
            args.append(value)
    if query.tags_any:
        # A frequent tag: walk items in id order and stop at the limit (the hint keeps the
        # planner from looking up every tagged id and sorting them); a rare tag: look its ids up.
        tags_any = sealed(query.tags_any, "tag")
        frequent = tag_rows is not None and tag_rows(tags_any) > FREQUENT_TAG_ROWS
        tagged = f"SELECT item_id FROM item_tags WHERE tag IN ({dialect.placeholders(tags_any)})"
        where.append(dialect.unindexed(f"i.id IN ({tagged})", when=frequent))
        args.extend(tags_any)
    if query.tags_all:
        where.append(
            f"i.id IN (SELECT item_id FROM item_tags WHERE tag IN ({dialect.placeholders(query.tags_all)})"
            f" GROUP BY item_id HAVING count(*) = {p})"
        )
        args.extend([*sealed(query.tags_all, "tag"), len(set(query.tags_all))])
    if query.content_hash is not None:
        where.append(f"i.content_hash = {p}")
        args.append(query.content_hash)
    if query.scope_projects is not None:
        listed = dialect.placeholders(query.scope_projects) or "NULL"
        where.append(f"(i.scope != 'project' OR i.project_id IN ({listed}))")
        args.extend(query.scope_projects)
    return " AND ".join(where), args
