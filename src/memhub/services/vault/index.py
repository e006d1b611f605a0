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

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from memhub.core.hashing import content_hash
from memhub.core.models import Kind, Scope, Viewer
from memhub.services.vault.config import SYNC_BATCH_FILES
from memhub.services.vault.links import Names, links
from memhub.services.vault.notes import Note, NoteCache, fold
from memhub.services.vault.paths import Vault
from memhub.store.base import ItemQuery, NewItem, Tx

WIKI_LINK = "wiki_link"
ALL_NOTES = 10_000_000


@dataclass(frozen=True, slots=True)
class Listing:
    """One walk of the vault (services/vault/state.py makes them)."""

    generation: int
    files: list[tuple[str, os.stat_result]]  # every note of the vault, in path order


@dataclass
class Changes:
    notes: dict[str, Note | None] = field(default_factory=dict)  # path -> new note (None: gone)
    stamps: dict[str, tuple[int, int]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    alive: set[str] | None = None  # every note of a new walk (None: no walk this time)
    paths: list[str] = field(default_factory=list)  # every note of the current walk


class NoteIndex:
    """What the store holds for each note, and the mtime scan that keeps it in step."""

    def __init__(self) -> None:
        self._stamps: dict[str, tuple[int, int]] = {}
        self._stored: dict[str, tuple[str, list[int]]] | None = None  # path -> (sha, item ids)
        self._generation = -1
        self._lock = threading.Lock()
        # wiki links whose target was not indexed yet: folded target name -> linking items
        self._pending: dict[str, set[int]] = {}

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
        changes.paths = [rel for rel, _st in listing.files]
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
        for item in tx.query_items(viewer, ItemQuery(kinds=(Kind.NOTE,), owner=owner, limit=ALL_NOTES)):
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
        indexed: dict[str, tuple[Note, list[tuple[int, int, int]]]] = {}
        incoming: dict[str, set[int]] = {}
        for rel, note in changes.notes.items():
            old_sha, old_ids = stored.get(rel, ("", []))
            if note is not None and note.sha256 == old_sha:
                continue
            if old_ids:  # links into the old items go with them: remember their sources
                old = set(old_ids)
                edges = tx.links_of(old_ids, (WIKI_LINK,))
                incoming[rel] = {e.src for e in edges if e.dst in old and e.src not in old}
                tx.delete_items(old_ids)
            stored.pop(rel, None)
            if note is not None:
                rows = [(tx.insert_item(item).id, *item.attrs["lines"]) for item in _items(note, vault.owner)]
                stored[rel] = (note.sha256, [item_id for item_id, _s, _e in rows])
                indexed[rel] = (note, rows)
            touched += 1
        if indexed:
            self._link(tx, stored, indexed, incoming, Names(changes.paths))
        self._stored = stored
        return touched

    def _link(
        self,
        tx: Tx,
        stored: dict[str, tuple[str, list[int]]],
        indexed: dict[str, tuple[Note, list[tuple[int, int, int]]]],
        incoming: dict[str, set[int]],
        names: Names,
    ) -> None:
        """`wiki_link` edges from the section holding a link to the first item of its target."""
        alive = {item for _sha, ids in stored.values() for item in ids}

        def first(rel: str) -> int | None:
            ids = stored.get(rel, ("", []))[1]
            return ids[0] if ids else None

        for rel, (note, rows) in indexed.items():
            target_id = first(rel)
            for source in self._pending.pop(_key(rel), set()) | incoming.get(rel, set()):
                if target_id is not None and source in alive and source != target_id:
                    tx.upsert_link(source, target_id, WIKI_LINK, None, 1.0)
            for link in links(note.lines):
                if not link.target:
                    continue
                holder = next((i for i, start, end in rows if start <= link.line <= end), None)
                if holder is None:
                    continue
                target = names.resolve(link, rel)
                dst = first(target) if target else None
                if dst is None:
                    self._pending.setdefault(_key(link.target), set()).add(holder)
                elif dst != holder:
                    tx.upsert_link(holder, dst, WIKI_LINK, None, 1.0)

    def committed(self, changes: Changes) -> None:
        """Remember the stamps once the transaction that applied `changes` committed."""
        with self._lock:
            self._stamps.update(changes.stamps)
            for rel in changes.gone:
                self._stamps.pop(rel, None)

    def rolled_back(self) -> None:
        """A failed transaction: reload what the store holds on the next apply."""
        self._stored = None


def _key(target: str) -> str:
    """A link target's name as the pending links are keyed: folded, without folder and `.md`."""
    name = target.rsplit("/", 1)[-1]
    return fold(name[:-3] if name.lower().endswith(".md") else name)


def _items(note: Note, owner: str) -> list[NewItem]:
    name = Path(note.rel).stem
    items = []
    for section in note.spans:
        body = "\n".join(note.lines[section.start - 1 : section.end]).strip()
        if not body:
            continue
        items.append(
            NewItem(
                kind=Kind.NOTE,
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
