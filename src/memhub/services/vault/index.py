"""The one store: note sections are also items (kind "note"), so memhub's shared search
finds vault knowledge, with `attrs.path` and `attrs.lines` leading back to the note.

Items follow the files, never the other way round. On access (any vault tool call, at most
every SYNC_INTERVAL_S seconds; memhub's own writes at once) the vault is walked and each
note whose mtime or size changed is re-read; if its SHA-256 differs from the one its items
were made from, its items are replaced. Notes that disappeared lose their items. Changes
made outside memhub therefore reach the store on the next vault call, at most
SYNC_BATCH_FILES files per call.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memhub.core.hashing import content_hash
from memhub.core.models import Scope, Viewer
from memhub.services.vault.config import SYNC_BATCH_FILES
from memhub.services.vault.notes import Note, NoteCache
from memhub.services.vault.paths import Vault
from memhub.store.base import ItemQuery, NewItem, Tx

if TYPE_CHECKING:
    from memhub.services.vault.state import Listing

NOTE = "note"
ALL_NOTES = 10_000_000


@dataclass
class Changes:
    notes: dict[str, Note | None] = field(default_factory=dict)  # path -> new note (None: gone)
    stamps: dict[str, tuple[int, int]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    alive: set[str] | None = None  # every note of a new walk (None: no walk this time)


class NoteIndex:
    """What the store holds for each note, and the mtime scan that keeps it in step."""

    def __init__(self) -> None:
        self._stamps: dict[str, tuple[int, int]] = {}
        self._stored: dict[str, tuple[str, list[int]]] | None = None  # path -> (sha, item ids)
        self._generation = -1
        self._lock = threading.Lock()

    def scan(
        self, vault: Vault, cache: NoteCache, listing: Listing, *, force: set[str] | None = None
    ) -> Changes:
        """Notes changed since the last scan: all of them when `listing` is a new walk of the
        vault, else only the paths in `force`."""
        changes = Changes()
        with self._lock:
            due = listing.generation != self._generation
            if due:
                self._generation = listing.generation
            stamps = dict(self._stamps)
        if due:
            alive: set[str] = set()
            for rel, st in listing.files:
                alive.add(rel)
                stamp = (st.st_mtime_ns, st.st_size)
                if stamps.get(rel) != stamp and len(changes.notes) < SYNC_BATCH_FILES:
                    changes.notes[rel] = cache.get(vault.root, rel, *stamp)
                    changes.stamps[rel] = stamp
            changes.gone = set(stamps) - alive
            changes.alive = alive
            cache.prune(alive)
        for rel in force or ():
            path = vault.root / rel
            try:
                st = path.stat()
            except FileNotFoundError:
                changes.gone.add(rel)
                continue
            changes.notes[rel] = cache.get(vault.root, rel, st.st_mtime_ns, st.st_size)
            changes.stamps[rel] = (st.st_mtime_ns, st.st_size)
        return changes

    def _load(self, tx: Tx, owner: str) -> dict[str, tuple[str, list[int]]]:
        stored: dict[str, tuple[str, list[int]]] = {}
        viewer = Viewer(principal=owner, now=tx.now)
        for item in tx.query_items(viewer, ItemQuery(kinds=(NOTE,), owner=owner, limit=ALL_NOTES)):
            path = str(item.attrs.get("path", ""))
            sha = str(item.attrs.get("file_sha256", ""))
            stored.setdefault(path, (sha, []))[1].append(item.id)
        return stored

    def apply(self, tx: Tx, vault: Vault, changes: Changes) -> int:
        """Write `changes` to the store in `tx`; the number of notes (re)indexed or dropped."""
        stored = self._stored if self._stored is not None else self._load(tx, vault.owner)
        touched = 0
        gone = set(changes.gone)
        if changes.alive is not None:  # notes deleted while no memhub was watching, too
            gone |= set(stored) - changes.alive
        for rel in gone:
            _sha, ids = stored.pop(rel, ("", []))
            if ids:
                tx.delete_items(ids)
                touched += 1
        for rel, note in changes.notes.items():
            old_sha, old_ids = stored.get(rel, ("", []))
            if note is not None and note.sha256 == old_sha:
                continue
            if old_ids:
                tx.delete_items(old_ids)
            stored.pop(rel, None)
            if note is not None:
                stored[rel] = (note.sha256, [tx.insert_item(item).id for item in _items(note, vault.owner)])
            touched += 1
        self._stored = stored
        return touched

    def committed(self, changes: Changes) -> None:
        """Remember the stamps once the transaction that applied `changes` committed."""
        with self._lock:
            self._stamps.update(changes.stamps)
            for rel in changes.gone:
                self._stamps.pop(rel, None)

    def rolled_back(self) -> None:
        """A failed transaction: reload what the store holds on the next apply."""
        self._stored = None


def _items(note: Note, owner: str) -> list[NewItem]:
    name = Path(note.rel).stem
    items = []
    for section in note.spans:
        body = "\n".join(note.lines[section.start - 1 : section.end]).strip()
        if not body:
            continue
        items.append(
            NewItem(
                kind=NOTE,
                owner=owner,
                scope=Scope.USER.value,
                title=f"{name} › {section.heading}" if section.heading else name,
                body=body,
                tags=("vault",),
                attrs={"path": note.rel, "lines": [section.start, section.end], "file_sha256": note.sha256},
                content_hash=content_hash(body),
            )
        )
    return items
