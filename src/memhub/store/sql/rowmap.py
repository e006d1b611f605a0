"""Rows of any SQL backend (a mapping of column name to value) as the store's row types."""

from __future__ import annotations

import json
from typing import Any, Protocol

from memhub.store.crypto import ContentCipher
from memhub.store.rows import ItemRow, PolicyRow


class Columns(Protocol):
    """A row by column name: sqlite3.Row, psycopg's dict rows."""

    def __getitem__(self, column: str, /) -> Any: ...


def item_from_row(row: Columns, cipher: ContentCipher | None = None) -> ItemRow:
    title, body = row["title"], row["body"]
    tags, attrs, category = row["tags"], row["attrs"], row["category"]
    if cipher is not None:
        title, body = cipher.decrypt(title, "title"), cipher.decrypt(body, "body") or ""
        tags, attrs = cipher.decrypt(tags, "tags") or "[]", cipher.decrypt(attrs, "attrs") or "{}"
        category = cipher.decrypt(category, "category")
    return ItemRow(
        id=row["id"],
        kind=row["kind"],
        project_id=row["project_id"],
        session_id=row["session_id"],
        parent_id=row["parent_id"],
        owner=row["owner"],
        scope=row["scope"],
        boundary_class=row["boundary_class"],
        status=row["status"],
        title=title,
        body=body,
        tags=tuple(json.loads(tags)),
        attrs=json.loads(attrs),
        content_hash=row["content_hash"],
        importance=row["importance"],
        quality=row["quality"],
        access_count=row["access_count"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        expires_at=row["expires_at"],
        category=category,
    )


def policy_from_row(row: Columns) -> PolicyRow:
    return PolicyRow(
        version=row["version"],
        yaml=row["yaml"],
        doc=json.loads(row["doc"]),
        author=row["author"],
        approver=row["approver"],
        signed=bool(row["signed"]),
        diff=json.loads(row["diff"]),
        applied_at=row["applied_at"],
    )
