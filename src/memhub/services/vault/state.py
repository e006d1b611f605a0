"""The vault of one server process: its root and owner, the parsed-note cache, the store
index and the SHA-256 of each note as memhub last showed or wrote it."""

from __future__ import annotations

import threading
from pathlib import Path

from memhub.services.vault.index import NoteIndex
from memhub.services.vault.notes import NoteCache
from memhub.services.vault.paths import Vault


class VaultState:
    def __init__(self, root: Path, owner: str) -> None:
        self.vault = Vault(root, owner)
        self.cache = NoteCache()
        self.index = NoteIndex()
        self.write_lock = threading.Lock()  # memhub's own writes, one at a time
        self._seen: dict[str, str] = {}
        self._seen_lock = threading.Lock()

    def saw(self, rel: str, sha256: str) -> None:
        """A client was shown (or memhub wrote) this version of the note."""
        with self._seen_lock:
            self._seen[rel] = sha256

    def last_seen(self, rel: str) -> str | None:
        with self._seen_lock:
            return self._seen.get(rel)
