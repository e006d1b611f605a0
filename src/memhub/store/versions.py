"""The newest schema version this memhub's migrations bring each backend to (what a readiness
probe compares the store's `schema_version()` with)."""

from __future__ import annotations

from importlib import resources

_PACKAGES = {"sqlite": "memhub.store.sqlite", "postgresql": "memhub.store.postgres"}


def known_schema_version(backend: str) -> int:
    """The highest migration number shipped for `backend` ("sqlite", "postgresql")."""
    folder = resources.files(_PACKAGES[backend]) / "migrations"
    return max(int(entry.name.split("_", 1)[0]) for entry in folder.iterdir() if entry.name.endswith(".sql"))
