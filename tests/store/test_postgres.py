"""What only the PostgreSQL backend does: its keyword index tokens, refusing encryption, several
replicas migrating one database at once, (the audit chain's linearity is
test_audit_contract's). Runs on
PostgreSQL only (MEMHUB_TEST_BACKEND=postgresql, `make test-postgres`), except the pure parts."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memhub.core.errors import ErrorKind, MemhubError
from memhub.store import postgres
from memhub.store.open import open_store
from memhub.store.postgres import text
from memhub.store.postgres.database import redacted
from memhub.store.versions import known_schema_version
from tests.store.backends import Backend, postgres_only
from tests.store.contract import TickClock

on_postgres = postgres_only
MIGRATIONS = [p.name for p in (Path(postgres.__file__).parent / "migrations").glob("*.sql")]


def test_tsvector_holds_the_sqlite_index_tokens_folded_like_fts5() -> None:
    vector = text.tsvector("The Runners", "were running 設計議論 it's", ["Café"])
    assert vector.split() == [
        "'the':1", "'runner':2", "'were':3", "'run':4", "'設計':5", "'計議':6", "'議論':7",
        "'it':8", "'s':9", "'cafe':10",
    ]  # fmt: skip
    assert text.tsvector(None, "x" * 5_000, []) == ""  # too long for PostgreSQL: left out, not an error


def test_tsquery_quotes_every_lexeme() -> None:
    assert text.tsquery("running") == "'run'"
    assert text.tsquery("設計議論") == "'設計' <-> '計議' <-> '議論'"
    assert text.tsquery("設") == "'設':*"
    assert text.tsquery("it's") == "'it''s'"
    assert text.tsquery("a\\b") == "'a\\\\b'"
    assert text.tsquery("") is None
    assert text.any_of(["'a'", "'b' <-> 'c'"]) == "('a') | ('b' <-> 'c')"
    assert text.any_of(["'b' <-> 'c'"]) == "'b' <-> 'c'"


def test_the_location_never_shows_the_password() -> None:
    assert redacted("postgresql://memhub:s3cret@db.internal:5432/memhub") == (
        "postgresql://memhub:***@db.internal:5432/memhub"
    )
    assert redacted("postgresql://memhub@db/memhub") == "postgresql://memhub@db/memhub"


@on_postgres
def test_encryption_is_refused_with_a_clear_message(tmp_path: Path, backend: Backend) -> None:
    with pytest.raises(MemhubError) as refused:
        open_store(backend.url(tmp_path), keys=[bytes(32)])
    assert refused.value.kind is ErrorKind.UNAVAILABLE
    assert "encryption is not available on PostgreSQL" in str(refused.value)


@on_postgres
def test_replicas_opening_a_fresh_database_together_migrate_it_once(tmp_path: Path, backend: Backend) -> None:
    url = backend.url(tmp_path)
    backend.execute(url, "DROP SCHEMA public CASCADE")  # an empty database, not the migrated template
    backend.execute(url, "CREATE SCHEMA public")
    opened, failed = [], []

    def start() -> None:
        try:
            opened.append(open_store(url, clock=TickClock()))
        except MemhubError as exc:
            failed.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert not failed and len(opened) == 4
        latest = known_schema_version("postgresql")  # every migration, each applied once
        assert backend.rows(url, "SELECT version FROM schema_migrations ORDER BY version") == [
            (v,) for v in range(1, latest + 1)
        ]
        assert {store.schema_version() for store in opened} == {latest}
    finally:
        for store in opened:
            store.close()
