"""Every command a person runs, with `--db postgresql://…` (issue 20 §2), on the embedded
PostgreSQL whatever the backend under test: doctor (audit chain, row counts), apikey, reindex,
export/import, decision, proposal, policy; backup and encryption say why they do not apply."""

from __future__ import annotations

import json
from pathlib import Path

from memhub.services.ops import NO_BACKUPS
from tests.cli.test_migrate import POLICY, done, memhub
from tests.store.backends import Backend


def test_doctor_verifies_the_chain_and_counts_rows(tmp_path: Path, postgres: Backend) -> None:
    db = postgres.url(tmp_path)
    done(tmp_path, db, "decision", "add", "--title", "Use PostgreSQL", "--target", "db",
         "--rationale", "replicas share one database")  # fmt: skip
    healthy = memhub(tmp_path, db, "doctor")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    lines = healthy.stdout.splitlines()
    assert lines[0].startswith("database: postgresql://") and lines[1] == "integrity: ok"
    assert "rows: items 1, " in healthy.stdout and "audit chain: 1 events, ok" in healthy.stdout
    postgres.drop_audit_guard(db)
    postgres.execute(db, "UPDATE events SET detail = '{}'")
    broken = memhub(tmp_path, db, "doctor")
    assert broken.returncode == 1 and "audit chain: 1 events, BROKEN" in broken.stdout
    assert "event 1: content does not match its hash (edited)" in broken.stdout


def test_apikey_reindex_export_import(tmp_path: Path, postgres: Backend) -> None:
    db, other = postgres.url(tmp_path), postgres.url(tmp_path, "other")
    key = done(tmp_path, db, "apikey", "create", "alice", "--admin").strip()
    assert key.startswith("mh_")
    assert done(tmp_path, db, "apikey", "list").splitlines() == ["alice\tadmin\tkey"]
    assert "revoked" in done(tmp_path, db, "apikey", "revoke", "alice")
    assert done(tmp_path, db, "apikey", "list").splitlines() == ["alice\tadmin\t-"]
    exported = tmp_path / "memories.json"
    exported.write_text(json.dumps([{"content": "we chose PostgreSQL", "domain": "user"}]), encoding="utf-8")
    assert "imported 1 memories" in memhub(tmp_path, db, "import", str(exported)).stderr
    assert done(tmp_path, db, "export", "-o", str(tmp_path / "out.json")) == ""
    imported = memhub(tmp_path, other, "import", str(tmp_path / "out.json"))
    assert imported.returncode == 0 and "imported 1 memories" in imported.stderr
    assert [r[0] for r in postgres.rows(other, "SELECT body FROM items")] == ["we chose PostgreSQL"]
    assert json.loads(done(tmp_path, db, "reindex"))["text_indexed"] == 1


def test_decisions_proposals_and_policy(tmp_path: Path, postgres: Backend) -> None:
    db = postgres.url(tmp_path)
    for title, target in (("Use MySQL", "database_policy"), ("Use PostgreSQL", "Database-Policy")):
        done(
            tmp_path,
            db,
            "decision",
            "add",
            "--title",
            title,
            "--target",
            target,
            "--rationale",
            "the team needs what it offers",
        )
    assert "dec_2\tactive\tDatabase-Policy\tUse PostgreSQL" in done(tmp_path, db, "decision", "list")
    name = Path(done(tmp_path, db, "reflect").strip()).name
    accepted = done(tmp_path, db, "proposal", "accept", name, MEMHUB_REVIEW_WINDOW_S="0")
    assert accepted.strip() == f"proposal {name} accepted as dec_3, superseding dec_1, dec_2"

    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    signature = done(tmp_path, db, "policy", "sign", str(policy), "--approver", "carol",
                     MEMHUB_PCE_POLICY_HMAC_KEY="k3y").strip()  # fmt: skip
    applied = done(tmp_path, db, "policy", "apply", str(policy), "--approver", "carol",
                   "--signature", signature, MEMHUB_PCE_POLICY_HMAC_KEY="k3y")  # fmt: skip
    assert json.loads(applied)["in_force"] == "0.4.0"
    assert json.loads(done(tmp_path, db, "policy", "show"))["version"] == "0.4.0"


def test_what_does_not_apply_says_so(tmp_path: Path, postgres: Backend) -> None:
    db = postgres.url(tmp_path)
    backup = memhub(tmp_path, db, "backup", str(tmp_path / "copy.db"))
    assert backup.returncode == 1 and backup.stderr.strip() == f"memhub: {NO_BACKUPS['postgresql']}"
    rotate = memhub(tmp_path, db, "encryption", "rotate", "--decrypt")
    assert rotate.returncode == 1 and "cannot encrypt its content" in rotate.stderr
    keyed = memhub(tmp_path, db, "apikey", "list", MEMHUB_ENCRYPTION_KEY="A" * 43 + "=")
    assert keyed.returncode == 2 and "content encryption is not available on PostgreSQL" in keyed.stderr
