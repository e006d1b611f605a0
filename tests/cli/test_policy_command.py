"""`memhub policy sign|apply|show` as subprocesses: the same checks as pce.memory.policy.apply."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers import MEMHUB, REPO
from tests.store.backends import Backend

POLICY = """version: '0.4'
scopes: {session: {ttl: '1d', max_tokens: 5000}}
boundary_classes: {public: {allow: ['*']}, internal: {allow: ['answer:task']}}
"""


def memhub(db: str | Path, *args: str, key: str = "") -> subprocess.CompletedProcess[str]:
    env = {"MEMHUB_EMBEDDER": "none", "PATH": "/usr/bin:/bin", "MEMHUB_PCE_POLICY_HMAC_KEY": key}
    env["PYTHONPATH"] = str(REPO / "src")  # this checkout's source, whichever one the venv installed
    return subprocess.run(
        [MEMHUB, "--db", str(db), "--user", "alice", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_sign_then_apply_and_show(tmp_path: Path, backend: Backend) -> None:
    db, policy = backend.url(tmp_path, "m.db"), tmp_path / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    unsigned = memhub(db, "policy", "apply", str(policy), key="k3y")
    assert unsigned.returncode == 1 and "signed policies only" in unsigned.stderr
    signed = memhub(db, "policy", "sign", str(policy), "--approver", "carol", key="k3y")
    assert signed.returncode == 0, signed.stderr
    signature = signed.stdout.strip()
    dry = memhub(db, "policy", "apply", str(policy), "--approver", "carol", "--signature", signature,
                 "--dry-run", key="k3y")  # fmt: skip
    assert json.loads(dry.stdout) == {"version": "0.4.0", "applied": False, "in_force": "0.0.0"}
    done = memhub(db, "policy", "apply", str(policy), "--approver", "carol", "--signature", signature,
                  "--expected-version", "0.0.0", key="k3y")  # fmt: skip
    assert json.loads(done.stdout) == {"version": "0.4.0", "applied": True, "in_force": "0.4.0"}, done.stderr
    shown = json.loads(memhub(db, "policy", "show").stdout)
    assert shown["version"] == "0.4.0" and shown["approver"] == "carol" and shown["signed"] is True
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: [", encoding="utf-8")
    assert memhub(db, "policy", "apply", str(bad)).returncode == 1
