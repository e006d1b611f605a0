"""SQLite backend (stdlib sqlite3 only: no extension loading is needed)."""

from memhub.store.sqlite.database import SqliteStore

__all__ = ["SqliteStore"]
