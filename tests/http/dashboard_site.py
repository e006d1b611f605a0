"""A real `memhub serve --auth apikey` with data written through the real tools, for the
dashboard tests (HTTP and browser): three people (alice admin, bob member, vic a viewer of
alice's project), memories, claims, decisions with a supersede chain, a topic tree, hostile
text, and two proposals (one inside its review window, one past it)."""

from __future__ import annotations

import html
import os
import re
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.helpers import MEMHUB, http_server
from tests.store.backends import Backend

T = TypeVar("T")
HOSTILE = '<script>alert("xss")</script><img src=x onerror=alert(1)> deploy pipeline checklist'
HOSTILE_NOTE = """# Deploy guide <img src=x onerror=alert(1)>

<script>alert("note")</script>
<iframe src="javascript:alert(2)"></iframe>

- step **one**: read [the index](../index.md)
- step two: [click](javascript:alert(3)) and [data](data:text/html,<script>alert(4)</script>)

```
<b>code stays text</b>
```
"""
REVIEW_WINDOW_S = "3600"
OLD = 1_600_000_000  # 2020-09-13: a proposal file this old is past any review window


def in_thread(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`anyio.run(fn, *args)` on a thread of its own: Playwright's sync API keeps an event
    loop running in the test's thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, fn, *args).result()


def create_key(db: str, name: str, *extra: str) -> str:
    out = subprocess.run(
        [MEMHUB, "--db", str(db), "apikey", "create", name, *extra],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout.strip()


@dataclass
class Site:
    base: str
    home: Path
    db: str  # the store (Backend.url)
    keys: dict[str, str]
    ids: dict[str, Any] = field(default_factory=dict)

    def mcp(self, who: str) -> Client:
        http = httpx2.AsyncClient(headers={"X-API-Key": self.keys[who]}, timeout=30)
        return Client(streamable_http_client(f"{self.base}/mcp", http_client=http))

    def call(self, who: str, tool: str, **arguments: Any) -> dict[str, Any]:
        """One tool call as `who` over streamable HTTP (blocking: for sync tests)."""

        async def run() -> dict[str, Any]:
            async with self.mcp(who) as client:
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, result.content
                assert isinstance(result.structured_content, dict)
                return result.structured_content

        return in_thread(run)

    def browser(self) -> httpx2.Client:
        return httpx2.Client(base_url=self.base, follow_redirects=False, timeout=30)

    def login(self, who: str) -> httpx2.Client:
        client = self.browser()
        form = client.get("/ui/login")
        assert form.status_code == 200, form.text
        done = client.post("/ui/login", data={"csrf": csrf_of(form.text), "credential": self.keys[who]})
        assert done.status_code == 303 and done.headers["location"] == "/", done.text
        return client


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page[:500]
    return found.group(1)


def hits(page: str, group: str) -> list[tuple[str, float]]:
    """(public id, score) of one result group of the search page, in order."""
    section = re.search(
        rf'<section class="group" data-group="{re.escape(group)}">(.*?)</section>', page, re.S
    )
    assert section, group
    return [
        (m.group(1), float(m.group(2)))
        for m in re.finditer(
            r'<li class="hit" data-id="([^"]+)">.*?data-score="([^"]+)"', section.group(1), re.S
        )
    ]


def explained(page: str, public_id: str, name: str) -> str:
    """One number of a hit's explanation table, as shown."""
    item = re.search(
        rf'<li class="hit" data-id="{re.escape(public_id)}">(.*?)</li>\s*(?=<li|</ol>)', page, re.S
    )
    assert item, public_id
    cell = re.search(rf'data-field="{re.escape(name)}">([^<]*)<', item.group(1))
    assert cell, (public_id, name)
    return html.unescape(cell.group(1))


def _proposal(folder: Path, name: str, title: str, supersedes: list[str], *, old: bool) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    created = "2020-09-13T00:00:00.000000Z" if old else now
    path = folder / name
    path.write_text(
        "---\n"
        'status: "open"\n'
        'project: "demo"\n'
        'target: "database_policy"\n'
        f'title: "{title}"\n'
        f"supersedes: {supersedes!r}\n".replace("'", '"')
        + "consequences: []\n"
        f'created_at: "{created}"\n'
        "---\n"
        "Move the main store to PostgreSQL: the team runs it everywhere already.\n",
        encoding="utf-8",
    )
    if old:
        os.utime(path, (OLD, OLD))


async def _seed(site: Site) -> None:
    ids = site.ids
    async with site.mcp("alice") as alice, site.mcp("bob") as bob:

        async def a(tool: str, **args: Any) -> dict[str, Any]:
            result = await alice.call_tool(tool, args)
            assert not result.is_error, result.content
            assert isinstance(result.structured_content, dict)
            return result.structured_content

        async def b(tool: str, **args: Any) -> dict[str, Any]:
            result = await bob.call_tool(tool, args)
            assert not result.is_error, result.content
            assert isinstance(result.structured_content, dict)
            return result.structured_content

        for text in (
            "The deploy pipeline runs on every merge to main",
            "Deploy pipeline secrets live in the vault, never in the repository",
            "Lunch is at noon on Fridays",
            "デプロイのパイプラインは毎朝走る",
        ):
            await a("memory", action="store", content=text, domain="global", importance=0.6)
        hostile = await a("memory", action="store", content=HOSTILE, domain="user", tags=["<b>bold</b>"])
        ids["hostile"] = hostile["memory"]["id"]
        mine = await a("memory", action="store", content="alice private deploy pipeline note", domain="user")
        ids["alice_private"] = mine["memory"]["id"]
        theirs = await b("memory", action="store", content="bob private deploy pipeline plan", domain="user")
        ids["bob_private"] = theirs["memory"]["id"]
        first = await a(
            "record_decision", title="Use MySQL", target="database_policy",
            rationale="the team knows MySQL best and the pipeline supports it",
        )  # fmt: skip
        ids["dec_old"] = first["decision"]["id"]
        second = await a(
            "supersede_decision", old_decision_ids=[ids["dec_old"]], title="Use PostgreSQL",
            target="database_policy", rationale="the deploy pipeline needs JSON columns: PostgreSQL has them",
        )  # fmt: skip
        ids["dec_new"] = second["decision"]["id"]
        claim = await a(
            "pce.memory.upsert", text="The deploy pipeline publishes images to the registry",
            provenance={"at": "2026-11-01T00:00:00Z", "git": {"commit": "abc1234"}},
        )  # fmt: skip
        ids["claim"] = claim["data"]["id"]
        project = await a("add-project", name="atlas", description="アトラス計画")
        pid = project["project_id"]
        root = await a("add-topic", project_id=pid, title="Architecture")
        child = await a("add-topic", project_id=pid, title="Database", parent_topic_id=root["topic_id"])
        leaf = await a(
            "add-topic", project_id=pid, title="インデックス設計", parent_topic_id=child["topic_id"]
        )
        await a(
            "add-log", topic_id=child["topic_id"], content="We compared MySQL and PostgreSQL for the pipeline"
        )
        await a("add-decision", topic_id=child["topic_id"], decision="PostgreSQL", reason="JSON columns")
        ids.update(project=pid, root=root["topic_id"], child=child["topic_id"], leaf=leaf["topic_id"])
        await a("project", action="add_member", project_id=f"proj_{pid}", user_id="vic", role="viewer")
    folder = site.home / "proposals"
    _proposal(folder, "fresh.md", "Use CockroachDB", [ids["dec_new"]], old=False)
    _proposal(folder, "old.md", "Use PostgreSQL 17", [ids["dec_new"]], old=True)


@contextmanager
def dashboard_site(
    tmp: Path, backend: Backend, *extra: str, env: dict[str, str] | None = None
) -> Iterator[Site]:
    home = tmp / "home"
    (home / "vault" / "guides").mkdir(parents=True)
    (home / "vault" / "guides" / "hostile.md").write_text(HOSTILE_NOTE, encoding="utf-8")
    (home / "vault" / "index.md").write_text(
        "# 索引\n\nSee [[guides/hostile]] and [the guide](guides/hostile.md).\n"
    )
    db = backend.url(tmp, "m.db")
    keys = {
        "alice": create_key(db, "alice", "--admin"),
        "bob": create_key(db, "bob"),
        "vic": create_key(db, "vic"),
    }
    variables = {"MEMHUB_HOME": str(home), "MEMHUB_REVIEW_WINDOW_S": REVIEW_WINDOW_S, **(env or {})}
    with http_server(db, "--auth", "apikey", *extra, env=variables) as base:
        site = Site(base, home, db, keys)
        in_thread(_seed, site)
        yield site
