"""conformance-baseline.txt (read by `make check-clients`): one scenario per line, each with a reason."""

from __future__ import annotations

from tests.clients.check_clients import BASELINE, _baseline


def test_every_baseline_entry_has_a_reason_and_appears_once() -> None:
    names = [
        line.split()[0]
        for line in BASELINE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    entries = _baseline()
    assert len(names) == len(set(names)) == len(entries) > 0
    assert all(len(reason) > 20 for reason in entries.values()), entries
