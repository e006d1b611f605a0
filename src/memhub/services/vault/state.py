"""The vault of one server process: its root and owner, the parsed-note cache, the store
index and the SHA-256 of each note as memhub last showed or wrote it."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from memhub.services.vault.config import SYNC_INTERVAL_S
from memhub.services.vault.files import sweep_temp_files, vault_lock
from memhub.services.vault.index import Listing, NoteIndex
from memhub.services.vault.notes import NoteCache
from memhub.services.vault.paths import Vault

log = logging.getLogger("memhub.vault")


class VaultState:
    def __init__(
        self, root: Path, owner: str, interval_s: float = SYNC_INTERVAL_S, lock_mode: str = "auto"
    ) -> None:
        self.vault = Vault(root, owner)
        self.lock_mode = lock_mode  # files.vault_lock: "auto", "folder" or "file"
        self.cache = NoteCache()
        self.index = NoteIndex()
        self.interval_s = interval_s  # how long one walk of the vault answers find, search, sync
        self._write_lock = threading.Lock()  # this process's writes, one at a time
        self._seen: dict[str, str] = {}
        self._seen_lock = threading.Lock()
        self._listing = Listing(0, [])
        self._listed_at = float("-inf")
        self._listing_lock = threading.Lock()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """memhub's own writes to the vault, one at a time: across this process's threads and
        across every process serving the same vault (files.vault_lock)."""
        with self._write_lock, vault_lock(self.vault.root, mode=self.lock_mode):
            yield

    def sweep(self) -> int:
        """At start: delete the temporary files of writes that were killed (files.sweep_temp_files)."""
        with self._write_lock:
            removed = sweep_temp_files(self.vault.root, lock_mode=self.lock_mode)
        if removed:
            log.info("removed %d temporary file(s) left by interrupted vault writes", removed)
        return removed

    def listing(self) -> Listing:
        """The vault's notes with their stat, walked again when older than `interval_s` or
        after memhub wrote (so a client sees its own writes at once, others' within 2 s)."""
        with self._listing_lock:
            if time.monotonic() - self._listed_at < self.interval_s:
                return self._listing
            files = list(self.vault.text_files(self.vault.resolve(None, allow_root=True)))
            self._listing = Listing(self._listing.generation + 1, files)
            self._listed_at = time.monotonic()
            return self._listing

    def invalidate(self) -> None:
        with self._listing_lock:
            self._listed_at = float("-inf")

    def saw(self, rel: str, sha256: str) -> None:
        """A client was shown (or memhub wrote) this version of the note."""
        with self._seen_lock:
            self._seen[rel] = sha256

    def last_seen(self, rel: str) -> str | None:
        with self._seen_lock:
            return self._seen.get(rel)
