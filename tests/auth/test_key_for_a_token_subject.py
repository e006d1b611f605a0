"""An API key is never made for a name an identity provider's JWT subject already holds: the key
and the token would then share one account (and each other's private memories)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memhub.cli.main import main
from memhub.store.open import open_store
from tests.store.backends import Backend


def test_apikey_create_refuses_a_jwt_subject(
    tmp_path: Path, backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    url = backend.url(tmp_path)
    store = open_store(url)
    try:
        with store.transaction(write=True) as tx:
            tx.ensure_principal("carol", kind="agent")  # what a JWT with sub "carol" creates
    finally:
        store.close()
    assert main(["--home", str(tmp_path), "--db", url, "apikey", "create", "carol"]) != 0
    out = capsys.readouterr()
    assert "mh_" not in out.out and "identity provider" in out.err
    assert main(["--home", str(tmp_path), "--db", url, "apikey", "create", "dave"]) == 0
    assert capsys.readouterr().out.startswith("mh_")
