"""SQL shared by every SQL backend: the dialect object, the one visibility filter and the
item `where` builder. Security-critical conditions are written once here; a backend only
supplies its `Dialect` (placeholders, string functions, planner hints).

Pure string building: no database driver is imported here (tests/test_layers.py checks it).
"""

from memhub.store.sql.dialect import POSTGRESQL, SQLITE, Dialect
from memhub.store.sql.visibility import visible
from memhub.store.sql.where import item_where

__all__ = ["POSTGRESQL", "SQLITE", "Dialect", "item_where", "visible"]
