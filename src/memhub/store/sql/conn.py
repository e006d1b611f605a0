"""The little of a database connection the shared SQL mixins use: sqlite3's and psycopg's
(with dict rows) both fit. Rows are read by column name (`Columns`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...
    def fetchall(self) -> Sequence[Any]: ...


class Connection(Protocol):
    def execute(self, sql: Any, params: Any = ..., /) -> Cursor: ...
