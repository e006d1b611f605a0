"""Two `memhub serve` processes on one database behave as one server (issue 20 §3, §5).

On PostgreSQL (MEMHUB_TEST_BACKEND=postgresql) these are two replicas of one database; on
SQLite, two processes sharing one file, which is also a supported deployment. Through both at
once: concurrent writes (no loss, no duplicate ids), read-your-writes across them, a decision
recorded on one and superseded on the other (the decision cooldown holds across them), an
active context made on one and read on the other, a policy applied on one in force on the
other, a rate limit spent from one bucket, and `memhub doctor` clean afterwards (the audit
chain, with both processes' deferred read events, unbroken).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import MEMHUB, SHARED, http_server
from tests.http.rpc import call, post, request, session
from tests.store.backends import Backend

WRITERS_PER_REPLICA = 3
WRITES_EACH = 8
ADMIN_PER_MINUTE = 4
COOLDOWN_S = 1.5
ENV = {
    "MEMHUB_RATE_LIMIT_ADMIN": str(ADMIN_PER_MINUTE),
    "MEMHUB_DECISION_COOLDOWN_S": str(COOLDOWN_S),
}
SEED_POLICY = json.loads(
    (SHARED / "seeds" / "000_83c6bdc56f1ec8a5.txt")
    .read_text(encoding="utf-8")
    .split("**Example (apply policy with retrieval params)**")[1]
    .split("```json", 1)[1]
    .split("```", 1)[0]
)["yaml"]


@pytest.fixture
def replicas(tmp_path: Path, backend: Backend) -> Iterator[tuple[str, str, str]]:
    """(database URL, base URL of replica A, of replica B): two servers on one store."""
    url = backend.url(tmp_path)
    env = {**ENV, "MEMHUB_HOME": str(tmp_path), "MEMHUB_VAULT": str(tmp_path / "vault")}
    with ExitStack() as stack:
        first = stack.enter_context(http_server(url, env=env))
        second = stack.enter_context(http_server(url, env=env))
        yield url, first, second


def _ok(base: str, headers: dict[str, str], tool: str, **arguments: Any) -> dict[str, Any]:
    status, _, result = call(base, headers, tool, **arguments)
    assert status == 200 and result is not None and not result.get("isError"), (tool, status, result)
    body: dict[str, Any] = result["structuredContent"]
    return body


def _refusal(base: str, headers: dict[str, str], tool: str, **arguments: Any) -> str:
    """The error text of a call that must fail (an isError result)."""
    status, _, result = call(base, headers, tool, **arguments)
    assert status == 200 and result is not None and result.get("isError"), (tool, status, result)
    return str(result["content"][0]["text"])


def test_two_replicas_behave_as_one_server(replicas: tuple[str, str, str], backend: Backend) -> None:
    url, a, b = replicas
    on_a, on_b = session(a), session(b)

    # concurrent writes through both: every one stored once, ids unique
    ids: list[str] = []
    failures: list[Exception] = []

    def write(base: str, writer: int) -> None:
        try:
            headers = session(base)
            for n in range(WRITES_EACH):
                body = _ok(
                    base, headers, "memory", action="store", domain="user", content=f"w{writer} n{n} text"
                )
                ids.append(body["memory"]["id"])
        except (AssertionError, OSError, KeyError) as exc:  # reported by the test thread below
            failures.append(exc)

    threads = [
        threading.Thread(target=write, args=(base, i)) for i, base in enumerate([a, b] * WRITERS_PER_REPLICA)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    total = 2 * WRITERS_PER_REPLICA * WRITES_EACH
    assert len(ids) == total and len(set(ids)) == total
    assert backend.rows(url, "SELECT count(*) FROM items WHERE kind = 'memory'")[0][0] == total

    # read your writes across replicas: stored on A, read and found by keyword on B at once
    stored = _ok(a, on_a, "memory", action="store", domain="user", content="zeppelin hangar replica note")
    got = _ok(b, on_b, "memory", action="get", memory_id=stored["memory"]["id"])
    assert got["memory"]["content"] == "zeppelin hangar replica note"
    found = _ok(b, on_b, "memory", action="search", query="zeppelin hangar")
    assert [m["id"] for m in found["memories"]] == [stored["memory"]["id"]]

    # a decision recorded on A, superseded on B (once the cooldown, counted across both, allows)
    old = _ok(
        a, on_a, "record_decision", title="Use MySQL", target="database_policy", rationale="we know it well"
    )
    refused = _refusal(b, on_b, "record_decision", title="Use Oracle", target="x", rationale="too soon after")
    assert "decisions may be written once every" in refused
    deadline = time.monotonic() + 20
    while True:
        status, _, result = call(
            b, on_b, "supersede_decision", title="Use PostgreSQL", target="database_policy",
            rationale="JSON columns and better concurrency", old_decision_ids=[old["decision"]["id"]],
        )  # fmt: skip
        assert status == 200 and result is not None
        if not result.get("isError"):
            new = result["structuredContent"]
            break
        assert "decisions may be written once every" in result["content"][0]["text"]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    audit = _ok(a, on_a, "search_decisions", query="MySQL", mode="audit")
    assert next(r["chain"] for r in audit["results"]) == [old["decision"]["id"], new["decision"]["id"]]

    # pce: a policy applied on B is in force on A; an active context made on A is read on B
    applied = _ok(b, on_b, "pce.memory.policy.apply", yaml=SEED_POLICY, expected_version="0.0.0")
    assert applied["data"] == {"version": "0.1.0"}
    context = _ok(a, on_a, "pce.memory.activate", q="webhook retry budget")
    assert context["policy_version"] == "0.1.0"
    context_id = context["data"]["active_context_id"]
    status, _, raw = post(
        b,
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "resources/read",
            "params": {"uri": f"pce://active-context/{context_id}"},
        },
        on_b,
    )
    assert status == 200 and context_id in raw.decode()

    # one rate limit for both: the admin class allows ADMIN_PER_MINUTE a minute in all (the
    # policy apply above spent one), however the calls are spread over the replicas
    allowed = {a: 0, b: 0}
    refused_by = {a: 0, b: 0}
    for base, headers in [(a, on_a), (b, on_b)] * ADMIN_PER_MINUTE:
        status, _, result = call(base, headers, "admin", action="health_check")
        if status == 200 and result is not None and not result.get("isError"):
            allowed[base] += 1
        else:
            assert status == 429 or "rate limit reached" in json.dumps(result), (status, result)
            refused_by[base] += 1
    assert ADMIN_PER_MINUTE - 1 <= sum(allowed.values()) <= ADMIN_PER_MINUTE  # not per replica
    assert refused_by[a] and refused_by[b]

    # MCP sessions live in the replica that opened them: the load balancer must be sticky
    status, _, _ = call(b, on_a, "memory", action="get", memory_id=stored["memory"]["id"])
    assert status == 404


def test_doctor_is_clean_after_two_replicas(
    tmp_path: Path, backend: Backend, replicas: tuple[str, str, str]
) -> None:
    url, a, b = replicas
    headers = {a: session(a), b: session(b)}
    for base in (a, b, a, b):
        stored = _ok(
            base, headers[base], "memory", action="store", domain="user", content=f"audited on {base}"
        )
        for other in (a, b):  # reads: audited later, by each replica's deferred writes
            _ok(other, headers[other], "memory", action="get", memory_id=stored["memory"]["id"])
    deadline = time.monotonic() + 20
    while backend.rows(url, "SELECT count(*) FROM events WHERE tool = 'memory'")[0][0] < 12:
        assert time.monotonic() < deadline, "the deferred read events were never written"
        time.sleep(0.05)
    env = {**os.environ, "MEMHUB_HOME": str(tmp_path)}
    done = subprocess.run(
        [MEMHUB, "--db", url, "doctor"], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "integrity: ok" in done.stdout and ", ok" in done.stdout.split("audit chain:")[1]


def test_ready_says_whether_the_store_answers_with_every_migration_applied(
    tmp_path: Path, backend: Backend
) -> None:
    url = backend.url(tmp_path)
    with http_server(url, env={"MEMHUB_HOME": str(tmp_path)}) as base:
        status, _, raw = request(base, "GET", "/ready", {})
        body = json.loads(raw)
        assert status == 200 and body["status"] == "ready" and body["store"] == "ok"
        assert body["schema_version"] == body["schema_expected"] >= 1
        latest = body["schema_expected"]
        backend.execute(url, "DELETE FROM schema_migrations WHERE version = ?", [latest])  # an older schema
        status, _, raw = request(base, "GET", "/ready", {})
        body = json.loads(raw)
        assert status == 503 and body["status"] == "not ready"
        assert body["schema_version"] == latest - 1 and "migrations have not run" in body["reason"]
        status, _, raw = request(base, "GET", "/health", {})
        assert status == 200  # alive all the same: liveness is not readiness
