"""Access through the tools: naming an unknown user or a malformed id is an error, never an
empty result or a new user; a taken project name is confirmed only to those who see it."""

from __future__ import annotations

import json

import pytest

from tests.pair import Pair
from tests.store.backends import rows

pytestmark = pytest.mark.anyio


def _principals(db: str) -> set[str]:
    return {r[0] for r in rows(db, "SELECT id FROM principals")}


async def test_adding_an_unknown_user_does_not_create_them(pair: Pair) -> None:
    project = (await pair.a("project", action="create", name="team"))["project"]["id"]
    before = _principals(pair.container.settings.db_url)
    err = await pair.a_err(
        "project", action="add_member", project_id=project, user_id="no-such-user", role="editor"
    )
    assert err["error"]["code"] == "not_found" and "no-such-user" in err["error"]["message"]
    assert _principals(pair.container.settings.db_url) == before
    await pair.a("project", action="add_member", project_id=project, user_id="bob", role="viewer")  # known


async def test_unknown_or_malformed_ids_are_errors_not_empty_results(pair: Pair) -> None:
    await pair.a("memory", action="store", content="a note", domain="user")
    for action in ("stats", "export", "list_categories"):
        err = await pair.a_err("memory_manage", action=action, project_id="proj_999999")
        assert err["error"]["code"] == "not_found", action
        err = await pair.a_err("memory_manage", action=action, session_id="sess_ffffff")
        assert err["error"]["code"] == "not_found", action
    for kind in ("stats_dashboard", "timeline", "category_chart", "domain_graph"):
        assert (await pair.a_err("visualize", type=kind, project_id="proj_999999"))["error"][
            "code"
        ] == "not_found"
        assert (await pair.a_err("visualize", type=kind, project_id="mem_1"))["error"]["code"] == (
            "invalid_parameter"
        )
        assert (await pair.a_err("visualize", type=kind, session_id="not a session"))["error"]["code"] == (
            "invalid_parameter"
        )
    before = await pair.counts()
    err = await pair.a_err("memory", action="store", content="x", domain="user", session_id="sess_abc123")
    assert err["error"]["code"] == "invalid_parameter" and "session domain" in err["error"]["message"]
    assert await pair.counts() == before
    private = (await pair.a("project", action="create", name="alice-only"))["project"]["id"]
    assert (await pair.b_err("memory_manage", action="stats", project_id=private))["error"][
        "code"
    ] == "not_found"


async def test_a_taken_name_is_confirmed_only_to_those_who_see_the_project(pair: Pair) -> None:
    await pair.a("project", action="create", name="stealth-project")
    mine = await pair.a_err("project", action="create", name="stealth-project")
    assert "already exists" in mine["error"]["message"]
    for err in (
        await pair.b_err("project", action="create", name="stealth-project"),
        {"error": await _discussion_error(pair)},
    ):
        assert "already exists" not in err["error"]["message"]
        assert "not available" in err["error"]["message"]


async def _discussion_error(pair: Pair) -> dict[str, str]:
    result = await pair.bob.call_tool("add-project", {"name": "stealth-project"})
    assert result.is_error
    body: dict[str, str] = json.loads(result.content[0].text)["error"]
    assert body["code"] == "INVALID_PARAMETER"
    return body
