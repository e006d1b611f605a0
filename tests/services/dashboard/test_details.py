"""An item's page in the dashboard: what its links show to the one reading it."""

from __future__ import annotations

from pathlib import Path

from memhub.core.models import Principal
from memhub.services.dashboard import details
from memhub.store.base import NewItem
from memhub.store.open import open_store
from tests.store.backends import Backend


def test_links_to_unreadable_items_do_not_crowd_out_readable_ones(tmp_path: Path, backend: Backend) -> None:
    """More than 4 × MAX_LINKS links to another user's private memories came first, and the page
    used to cut the list before filtering it: the readable neighbours after them were lost."""
    store = open_store(backend.url(tmp_path, "d.db"))
    try:
        with store.transaction(write=True) as tx:
            tx.ensure_principal("alice")
            tx.ensure_principal("bob")
            hub = tx.insert_item(NewItem(kind="memory", owner="alice", scope="user", body="hub")).id
            hidden = [
                tx.insert_item(NewItem(kind="memory", owner="bob", scope="user", body=f"bob's {n}")).id
                for n in range(details.MAX_LINKS * 5)
            ]
            mine = [
                tx.insert_item(NewItem(kind="memory", owner="alice", scope="user", body=f"mine {n}")).id
                for n in range(3)
            ]
            for other in [*hidden, *mine]:
                tx.upsert_link(hub, other, "semantic", None, 0.9)
        with store.transaction(write=False) as tx:
            page = details.item(tx, Principal("alice"), hub)
        assert sorted(link.other for link in page.links) == mine
        with store.transaction(write=False) as tx:
            bobs = details.item(tx, Principal("bob"), hidden[0])
        assert [link.other for link in bobs.links] == []  # alice's hub is not bob's to see
    finally:
        store.close()
