"""The decisions toolset (seed 002) through the real MCP client: the four guarantees and the
penalties with their scores, errors in the seed's vocabulary, proposals and the review window."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memhub.auth.identity import Identity
from memhub.cli.container import Container, build_container
from memhub.core.clock import Clock, SystemClock
from memhub.core.ids import DEC
from memhub.core.models import Principal, ProjectRole
from memhub.mcp.server import build_mcp_server
from memhub.services import decision_model
from memhub.services.decisions import models as m
from memhub.services.decisions import proposals, service
from tests.cli.test_decision_commands import memhub
from tests.conftest import make_settings
from tests.helpers import counts, error_body, ok
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio
SECRET = "correct horse battery staple"


class ShiftedClock:
    """The system clock moved by `offset` (the review window and cooldown without sleeping)."""

    def __init__(self, offset: timedelta) -> None:
        self.offset = offset

    def now(self) -> datetime:
        return SystemClock().now() + self.offset


@dataclass
class Env:
    container: Container
    alice: Client  # admin, owner of the project "demo"
    bob: Client  # member; a viewer of "demo" unless a test makes him an editor

    @property
    def db(self) -> str:
        return self.container.settings.db_url

    async def a(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await ok(self.alice, tool, **arguments)

    async def fail(self, client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
        """A failed call: `{"status": "error", "message": ...}`, isError, and nothing written."""
        before = counts(self.db)
        body = error_body(await client.call_tool(tool, arguments))
        assert body["status"] == "error" and body["message"], body
        assert counts(self.db) == before
        return body

    async def person(self, title: str, target: str, rationale: str, **kw: Any) -> dict[str, Any]:
        """A decision a person recorded (the CLI's service path, via="cli")."""
        call = self.container.call("decisions", Principal("alice", via="cli", default_project="demo"), "test")
        args = m.RecordInput(title=title, target=target, rationale=rationale)
        return (await service.record(call, args, **kw)).model_dump()["decision"]

    def set_clock(self, clock: Clock) -> None:
        self.container.runtime.clock = clock

    def role(self, who: str, role: ProjectRole) -> None:
        with self.container.runtime.store.transaction(write=True) as tx:
            project = tx.get_project_by_name("demo")
            assert project is not None
            tx.ensure_principal(who)
            tx.set_member(project.id, who, role)


def _container(tmp_path: Path, backend: Backend, **extra: object) -> Container:
    settings = make_settings(
        tmp_path, backend, toolsets=("decisions", "discussion"), agent_memory_secret=SECRET, **extra
    )
    return build_container(settings)


@pytest.fixture
def settings_extra() -> dict[str, object]:
    return {}


@pytest.fixture
def built(tmp_path: Path, backend: Backend, settings_extra: dict[str, object]) -> Iterator[Container]:
    container = _container(tmp_path, backend, **settings_extra)
    yield container
    container.close()


@pytest.fixture
async def env(built: Container) -> AsyncIterator[Env]:
    bob = Identity(Principal(id="bob", default_project="demo"), require_key=False)
    bob_server = build_mcp_server(built.runtime, ["decisions", "discussion"], bob, states=built.states)
    async with Client(built.server) as alice, Client(bob_server) as bob_client:
        yield Env(built, alice, bob_client)


async def _record(env: Env, title: str, target: str, rationale: str) -> str:
    out = await env.a("record_decision", title=title, target=target, rationale=rationale)
    return str(out["decision"]["id"])


async def _search(env: Env, query: str, mode: str, **kw: Any) -> list[dict[str, Any]]:
    return list((await env.a("search_decisions", query=query, mode=mode, **kw))["results"])


def _scores(results: list[dict[str, Any]]) -> list[tuple[str, str, float]]:
    return [(r["id"], r["status"], pytest.approx(r["score"])) for r in results]


# -- recording and superseding ------------------------------------------------------------------


async def test_record_and_supersede(env: Env) -> None:
    out = await env.a(
        "record_decision",
        title="Use MySQL",
        target="database_policy",
        rationale="the team knows it best",
        consequences=["hire no DBA"],
    )
    assert out["status"] == "success" and out["message"].endswith("[via MCP]")
    old = out["decision"]
    assert old["status"] == "active" and old["via"] == "mcp" and old["project"] == "demo"
    assert old["consequences"] == ["hire no DBA"] and old["supersedes"] == []
    assert old["id"].startswith("dec_")
    new = await env.a(
        "supersede_decision",
        title="Use PostgreSQL",
        target="database_policy",
        rationale="JSON columns and better concurrency",
        old_decision_ids=[old["id"].removeprefix("dec_")],  # the bare number works too
    )
    assert new["decision"]["supersedes"] == [old["id"]]
    audit = await _search(env, "MySQL", "audit")
    assert {(r["id"], r["status"]) for r in audit} == {
        (old["id"], "superseded"),
        (new["decision"]["id"], "active"),
    }
    # a recorded decision's text never changes: the old one reads as it was written
    assert any(r["preview"].startswith("Use MySQL — the team knows it best") for r in audit)

    again = await env.fail(
        env.alice,
        "supersede_decision",
        title="Use SQLite",
        target="database_policy",
        rationale="one file is all we need here",
        old_decision_ids=[old["id"]],
    )
    assert again["message"] == (
        f"Conflict: {old['id']} is already superseded by {new['decision']['id']}; supersede that instead"
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "fragment"),
    [
        ("record_decision", {"title": " ", "target": "t", "rationale": "long enough text"}, "title"),
        ("record_decision", {"title": "T", "target": "", "rationale": "long enough text"}, "target"),
        ("record_decision", {"title": "T", "target": "t", "rationale": "too short"}, "at least 10"),
        ("record_decision", {"title": "T", "target": "t"}, "rationale is required"),
        ("record_decision", {"title": "T", "target": "t", "rationale": "x" * 20, "x": 1}, "not a parameter"),
        (
            "supersede_decision",
            {"title": "T", "target": "t", "rationale": "fourteen chars"},
            "old_decision_ids",
        ),
        (
            "supersede_decision",
            {"title": "T", "target": "t", "rationale": "fourteen chars", "old_decision_ids": ["dec_1"]},
            "at least 15",
        ),
        (
            "supersede_decision",
            {"title": "T", "target": "t", "rationale": "long enough rationale", "old_decision_ids": []},
            "old_decision_ids",
        ),
        (
            "supersede_decision",
            {
                "title": "T",
                "target": "t",
                "rationale": "long enough rationale",
                "old_decision_ids": ["dec_999"],
            },
            "dec_999 does not exist or is not visible to you",
        ),
        (
            "supersede_decision",
            {"title": "T", "target": "t", "rationale": "long enough rationale", "old_decision_ids": ["abc"]},
            "old_decision_ids",
        ),
        ("search_decisions", {"query": "x", "limit": 21}, "limit"),
        ("search_decisions", {"query": "x", "limit": 0}, "limit"),
        ("search_decisions", {"query": "x", "mode": "loose"}, "mode"),
        ("search_decisions", {"query": ""}, "query"),
    ],
)
async def test_validation_errors(env: Env, tool: str, arguments: dict[str, Any], fragment: str) -> None:
    await _record(env, "A first decision", "t", "so the store is not empty")
    body = await env.fail(env.alice, tool, **arguments)
    assert body["message"].startswith("Validation Error: ") and fragment in body["message"], body


async def test_invisible_decisions_cannot_be_superseded(env: Env) -> None:
    """bob is no member of demo: alice's decision does not exist for him."""
    dec = await _record(env, "Use MySQL", "database_policy", "the team knows it best")
    body = await env.fail(
        env.bob,
        "supersede_decision",
        title="Use Oracle",
        target="database_policy",
        rationale="it is what we bought last year",
        old_decision_ids=[dec],
    )
    assert (
        body["message"]
        == f"Validation Error: old_decision_ids: {dec} does not exist or is not visible to you"
    )
    assert (await ok(env.bob, "search_decisions", query="MySQL", mode="audit"))["results"] == []


# -- human and agent ------------------------------------------------------------------------------


async def test_an_agent_may_not_supersede_a_person(env: Env) -> None:
    human = await env.person("Use PostgreSQL", "database_policy", "decided in the architecture review")
    assert human["via"] == "cli"
    body = await env.fail(
        env.alice,
        "supersede_decision",
        title="Use MySQL",
        target="database_policy",
        rationale="an agent would rather have MySQL",
        old_decision_ids=[human["id"]],
    )
    assert body["message"].startswith(f"Isolation Violation: {human['id']} was recorded by a person")
    # a person's decision has no [via MCP] marker, an agent's has
    results = await _search(env, "PostgreSQL", "balanced")
    assert results[0]["preview"] == "Use PostgreSQL — decided in the architecture review"


async def test_permission_denied_for_a_viewer(env: Env) -> None:
    await _record(env, "Use MySQL", "database_policy", "the team knows it best")
    env.role("bob", ProjectRole.VIEWER)
    body = await env.fail(
        env.bob, "record_decision", title="Use Oracle", target="database_policy", rationale="bought last year"
    )
    assert body["message"].startswith("Permission Denied: project 'demo' is read-only for you")
    env.role("bob", ProjectRole.EDITOR)
    out = await ok(env.bob, "record_decision", title="Use Oracle", target="db", rationale="bought last year")
    assert out["decision"]["project"] == "demo"


# -- the four guarantees and the penalties ----------------------------------------------------------


async def test_strict_mode_isolation(env: Env) -> None:
    """Guarantee 1: strict returns active decisions only, however well the others match."""
    old = await _record(env, "Use MySQL", "database_policy", "MySQL MySQL MySQL everywhere")
    new = (
        await env.a(
            "supersede_decision",
            title="Use PostgreSQL",
            target="database_policy",
            rationale="JSON columns and better concurrency",
            old_decision_ids=[old],
        )
    )["decision"]["id"]
    await env.person("Cache with memcached", "cache", "memcached is simple", draft=True)
    assert _scores(await _search(env, "MySQL", "strict")) == [(new, "active", 1.8)]  # reached by the chain
    assert await _search(env, "memcached", "strict") == []
    assert _scores(await _search(env, "MySQL", "audit")) == [(new, "active", 1.8), (old, "superseded", 0.2)]


async def test_state_aware_ranking_and_penalties(env: Env) -> None:
    """Guarantee 2 and the balanced penalties: active +1.0; superseded ×0.2, deprecated ×0.05, draft ×0.4."""
    old = await _record(env, "Use MySQL", "database_policy", "MySQL is what we know")
    new = (
        await env.a(
            "supersede_decision",
            title="Use PostgreSQL",
            target="database_policy",
            rationale="JSON columns and better concurrency",
            old_decision_ids=[old],
        )
    )["decision"]["id"]
    # one text hit: relevance 1.0 for it, 0.8 lent one hop along the chain
    assert _scores(await _search(env, "PostgreSQL", "audit")) == [
        (new, "active", 2.0),
        (old, "superseded", 0.16),
    ]
    assert _scores(await _search(env, "MySQL", "audit")) == [(new, "active", 1.8), (old, "superseded", 0.2)]

    retired = await _record(env, "Use redis for sessions", "sessions", "redis is already deployed")
    call = env.container.call("decisions", Principal("alice", via="cli", default_project="demo"), "test")
    await service.deprecate(call, retired, "sessions moved to signed cookies")
    assert _scores(await _search(env, "redis", "balanced")) == [(retired, "deprecated", 0.05)]

    with env.container.runtime.store.transaction(write=True) as tx:
        project = tx.get_project_by_name("demo")
        assert project is not None
        agent = Principal("alice", via="mcp")
        new = decision_model.NewDecision(
            project_id=project.id, title="Adopt Kafka", rationale="queue draft", target="queue",
            origin="decisions", draft=True,
        )  # fmt: skip
        row = decision_model.create(tx, agent, new)
    draft = DEC(row.id)
    assert _scores(await _search(env, "Kafka", "balanced")) == [(draft, "draft", 0.4)]


async def test_deduplication_by_target(env: Env) -> None:
    """Guarantee 3: several versions of one target -> only the most relevant active one."""
    a = await _record(env, "SQLite for tests", "Test Database", "SQLite files are fast for tests")
    b = await _record(env, "SQLite WAL for tests", "test_database", "SQLite WAL mode for parallel tests")
    c = await _record(env, "SQLite in production", "prod_database", "SQLite serves the production load")
    audit = await _search(env, "SQLite tests", "audit")
    assert {r["id"] for r in audit} == {a, b, c}
    balanced = await _search(env, "SQLite tests", "balanced")
    best_test_db = max((r for r in audit if r["id"] in (a, b)), key=lambda r: r["score"])
    assert {r["id"] for r in balanced} == {best_test_db["id"], c}
    assert next(r for r in balanced if r["target"] != "prod_database")["score"] == pytest.approx(
        best_test_db["score"]
    )
    assert len(await _search(env, "SQLite tests", "balanced", limit=1)) == 1


async def test_authority_weighting(env: Env) -> None:
    """Guarantee 4: a person's decision (no [via MCP] marker) gets +0.1."""
    agent = await _record(env, "Lint with ruff", "lint", "ruff is fast and complete")
    human = (await env.person("Format with ruff", "format", "ruff format replaces black"))["id"]
    agent_hit = await _search(env, "lint", "balanced")
    human_hit = await _search(env, "black", "balanced")
    assert _scores(agent_hit) == [(agent, "active", 2.0)] and agent_hit[0]["preview"].endswith("[via MCP]")
    assert _scores(human_hit) == [(human, "active", 2.1)] and "[via MCP]" not in human_hit[0]["preview"]


# -- other toolsets see the same decisions -------------------------------------------------------------


async def test_discussion_decisions_are_the_same_rows(env: Env) -> None:
    mine = await _record(env, "Use plan mode for TODOs", "plan_mode", "TODO decomposition needs it")
    demo = (await env.a("get-projects"))["projects"][0]
    assert demo["name"] == "demo"
    found = await env.a("search-decisions", project_id=demo["id"], keyword="plan mode")
    assert [d["id"] for d in found["decisions"]] == [int(mine.removeprefix("dec_"))]

    pid = (await env.a("add-project", name="design"))["project_id"]
    topic = (await env.a("add-topic", project_id=pid, title="Logging"))["topic_id"]
    theirs = await env.a(
        "add-decision", topic_id=topic, decision="Log to stderr", reason="stdout is JSON-RPC"
    )
    results = await _search(env, "stderr", "balanced")
    assert [(r["id"], r["target"], r["status"]) for r in results] == [
        (f"dec_{theirs['decision_id']}", "Logging", "active")
    ]
    # and bob, no member of either project, sees neither
    assert (await ok(env.bob, "search_decisions", query="stderr plan"))["results"] == []


# -- cooldown and rate limits ----------------------------------------------------------------------


@pytest.mark.parametrize("settings_extra", [{"decision_cooldown_s": 60.0}])
async def test_write_cooldown_per_principal(env: Env) -> None:
    first = await _record(env, "Use MySQL", "database_policy", "the team knows it best")
    body = await env.fail(
        env.alice, "record_decision", title="Use X", target="x", rationale="another decision"
    )
    assert body["message"].startswith("Rate Limit Exceeded: decisions may be written once every 60 s")
    assert 0 < body["retry_after_s"] <= 60
    await env.fail(
        env.alice,
        "supersede_decision",
        title="Use PostgreSQL",
        target="database_policy",
        rationale="JSON columns and better concurrency",
        old_decision_ids=[first],
    )
    env.role("bob", ProjectRole.EDITOR)
    await ok(env.bob, "record_decision", title="Bob's", target="y", rationale="bob has his own cooldown")
    env.set_clock(ShiftedClock(timedelta(seconds=61)))
    await _record(env, "Use X", "x", "another decision")


@pytest.mark.parametrize("settings_extra", [{"rate_limit_write": 1}])
async def test_generic_rate_limit_speaks_the_seed(env: Env) -> None:
    await _record(env, "Use MySQL", "database_policy", "the team knows it best")
    body = await env.fail(
        env.alice, "record_decision", title="Use X", target="x", rationale="another decision"
    )
    assert body["message"].startswith("Rate Limit Exceeded: rate limit reached")


# -- proposals ----------------------------------------------------------------------------------------


def _proposal(env: Env, name: str, supersedes: list[str], **meta: Any) -> Path:
    folder = env.container.settings.proposals_dir
    fields = {
        "project": "demo",
        "target": "database_policy",
        "title": "Use PostgreSQL",
        "supersedes": supersedes,
    }
    fields.update(meta)
    return proposals.write_new(folder, name, fields, "JSON columns and better concurrency")


def _status(path: Path) -> str:
    return str(proposals.parse(path.read_text(encoding="utf-8"))[0].get("status", "open"))


async def test_accept_proposal_gates_and_review_window(env: Env) -> None:
    old = await _record(env, "Use MySQL", "database_policy", "the team knows it best")
    path = _proposal(env, "db", [old], created_at=SystemClock().now().isoformat())
    name = path.name
    denied = [
        (env.alice, {}, "Permission Denied: AGENT_MEMORY_SECRET is missing or wrong"),
        (env.alice, {"secret": "guess"}, "Permission Denied: AGENT_MEMORY_SECRET is missing or wrong"),
        (env.bob, {"secret": SECRET}, "Permission Denied: accepting a proposal requires the ADMIN role"),
    ]
    for client, extra, message in denied:
        body = await env.fail(client, "accept_proposal", proposal_id=name, **extra)
        assert body["message"].startswith(message), body

    env.set_clock(ShiftedClock(timedelta(minutes=20)))
    early = await env.fail(env.alice, "accept_proposal", proposal_id=name, secret=SECRET)
    assert early["message"].startswith(f"PI1 Violation: proposal {name} is in its 1 h review window; 40 min")
    assert 39 * 60 < early["retry_after_s"] <= 40 * 60

    env.set_clock(ShiftedClock(timedelta(hours=1, seconds=5)))
    done = await env.a("accept_proposal", proposal_id=name, secret=SECRET)
    assert done["status"] == "success" and done["message"].startswith(f"proposal {name} accepted as dec_")
    assert f"superseding {old}" in done["message"]
    assert _status(path) == "accepted"
    twice = await env.fail(env.alice, "accept_proposal", proposal_id=name, secret=SECRET)
    assert twice["message"] == f"Conflict: proposal {name} is already accepted"

    for bad in ("../db.md", "/etc/passwd", "sub/db.md", "..", ".hidden.md"):
        body = await env.fail(env.alice, "accept_proposal", proposal_id=bad, secret=SECRET)
        assert body["message"].startswith("Validation Error: proposal_id must be a file name"), bad
    missing = await env.fail(env.alice, "accept_proposal", proposal_id="nope.md", secret=SECRET)
    assert missing["message"] == "Not Found: proposal nope.md does not exist"


async def test_an_invalid_or_stale_proposal_writes_nothing(env: Env) -> None:
    old = await _record(env, "Use MySQL", "database_policy", "the team knows it best")
    env.set_clock(ShiftedClock(timedelta(hours=2)))
    short = _proposal(env, "short", [old], title="")
    body = await env.fail(env.alice, "accept_proposal", proposal_id=short.name, secret=SECRET)
    assert body["message"].startswith(f"Validation Error: proposal {short.name} is not a valid decision")
    assert _status(short) == "open"
    await env.a(
        "supersede_decision",
        title="Use SQLite",
        target="database_policy",
        rationale="one file is all we need here",
        old_decision_ids=[old],
    )
    stale = _proposal(env, "stale", [old])
    body = await env.fail(env.alice, "accept_proposal", proposal_id=stale.name, secret=SECRET)
    assert body["message"].startswith(f"Conflict: {old} is already superseded")
    assert _status(stale) == "open"


async def test_lifecycle_record_conflict_reflect_accept(env: Env, tmp_path: Path) -> None:
    """record -> conflicting record -> `memhub reflect` -> proposal file -> accept after the
    window -> strict search shows only the new decision."""
    first = await _record(env, "Use MySQL", "database_policy", "the team knows MySQL best")
    second = await _record(env, "Use PostgreSQL", "Database Policy", "PostgreSQL has JSON columns")
    before = await _search(env, "MySQL PostgreSQL", "audit")
    assert {(r["id"], r["status"]) for r in before} == {(first, "active"), (second, "active")}

    done = await anyio.to_thread.run_sync(lambda: memhub(tmp_path, "reflect"))
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path.parent == env.container.settings.proposals_dir
    meta, body = proposals.parse(path.read_text(encoding="utf-8"))
    assert meta["supersedes"] == [first, second] and meta["status"] == "open" and meta["kind"] == "conflict"
    assert meta["title"] == "Use PostgreSQL" and body == "PostgreSQL has JSON columns"

    early = await env.fail(env.alice, "accept_proposal", proposal_id=path.name, secret=SECRET)
    assert early["message"].startswith("PI1 Violation")
    env.set_clock(ShiftedClock(timedelta(hours=1, minutes=1)))
    done_accept = await env.a("accept_proposal", proposal_id=path.name, secret=SECRET)
    new = done_accept["message"].split(" accepted as ")[1].split(",")[0]
    strict = await _search(env, "MySQL PostgreSQL database", "strict", limit=20)
    assert [(r["id"], r["status"]) for r in strict] == [(new, "active")]
    audit = await _search(env, "MySQL PostgreSQL database", "audit", limit=20)
    assert {r["id"]: r["status"] for r in audit} == {new: "active", first: "superseded", second: "superseded"}
    assert all(r["chain"] == sorted([first, second, new], key=lambda i: int(i[4:])) for r in audit)


async def test_reflect_tells_duplicates_by_the_shared_embeddings(tmp_path: Path, backend: Backend) -> None:
    """Same target, same text: `duplicate` by the cosine of the embedder's vectors; different
    texts on one target: `conflict`. A second reflection proposes nothing new."""
    from memhub.services.decisions import reflect

    container = _container(tmp_path, backend, embedder="hash")
    try:
        async with Client(container.server) as client:
            for _ in range(2):
                await ok(
                    client, "record_decision", title="Use ruff", target="lint", rationale="one fast linter"
                )
            await ok(client, "record_decision", title="Use MySQL", target="db", rationale="the team knows it")
            await ok(
                client,
                "record_decision",
                title="Use PostgreSQL",
                target="DB",
                rationale="JSON columns matter",
            )
        call = container.call(
            "decisions", Principal("alice", via="cli", default_project="demo"), "cli.reflect"
        )
        written = await reflect.reflect(call)
        kinds = {
            meta["target"]: (meta["kind"], meta["supersedes"])
            for meta, _ in (proposals.parse(p.read_text(encoding="utf-8")) for p in written)
        }
        assert kinds == {"lint": ("duplicate", ["dec_1", "dec_2"]), "DB": ("conflict", ["dec_3", "dec_4"])}
        assert await reflect.reflect(call) == []
    finally:
        container.close()
