"""A store holding plaintext refuses to start with an encryption key (it would mix the two)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from memhub.cli.container import build_container
from memhub.core.errors import MemhubError
from memhub.store.open import open_store
from memhub.store.rows import NewItem
from tests.conftest import make_settings
from tests.store.backends import Backend, sqlite_only

pytestmark = [
    pytest.mark.anyio,
    sqlite_only("encryption"),
]


def test_a_key_for_a_store_that_holds_plaintext_is_refused(tmp_path: Path, backend: Backend) -> None:
    store = open_store(backend.url(tmp_path, "memhub.db"))
    with store.transaction(write=True) as tx:
        tx.insert_item(NewItem(kind="memory", owner="alice", scope="user", body="kubernetes rollout plan"))
    store.close()
    key = base64.b64encode(os.urandom(32)).decode()
    with pytest.raises(MemhubError, match="encryption rotate"):
        build_container(make_settings(tmp_path, backend, embedder="none", encryption_key=key))
