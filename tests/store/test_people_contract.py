"""PeopleTx: principals, projects with members and roles, API keys, sessions."""

from __future__ import annotations

import pytest

from memhub.core.errors import MemhubError
from memhub.core.models import ProjectRole
from memhub.store.base import ItemQuery, Store
from tests.store.contract import ALL_CLASSES, Seed, viewer


def test_first_principal_is_admin_later_ones_members(store: Store) -> None:
    with store.transaction(write=True) as tx:
        assert tx.get_principal("alice") is None
        first = tx.ensure_principal("alice")
        second = tx.ensure_principal("ci-bot", kind="agent")
        now = tx.now
    assert (first.id, first.kind, first.role, first.current_session_id) == ("alice", "user", "admin", None)
    assert first.created_at == now
    assert (second.id, second.kind, second.role) == ("ci-bot", "agent", "member")
    with store.transaction(write=True) as tx:
        assert tx.ensure_principal("alice") == first  # idempotent: nothing changes on a second sight
        third = tx.ensure_principal("bob")
        assert third.role == "member"
        assert tx.get_principal("bob") == third
        assert {p.id for p in tx.list_principals()} == {"alice", "ci-bot", "bob"}


def test_project_insert_makes_the_owner_a_member(store: Store) -> None:
    with store.transaction(write=True) as tx:
        project = tx.insert_project("demo", "the demo", {"url": "https://example.org"}, "alice")
        now = tx.now
    assert (project.name, project.description, project.attrs, project.owner) == (
        "demo",
        "the demo",
        {"url": "https://example.org"},
        "alice",
    )
    assert project.created_at == project.updated_at == now
    with store.transaction(write=False) as tx:
        assert tx.get_project(project.id) == project
        assert tx.get_project_by_name("demo") == project
        assert tx.get_project(project.id + 100) is None
        assert tx.get_project_by_name("nope") is None
        assert tx.member_role(project.id, "alice") is ProjectRole.OWNER
        assert [(m.principal, m.role) for m in tx.list_members(project.id)] == [("alice", ProjectRole.OWNER)]
        assert tx.list_projects("alice", 10) == [project]
        assert tx.list_projects("bob", 10) == []


def test_duplicate_project_name_raises(store: Store, seed: Seed) -> None:
    first = seed.project("demo")
    # SQLite: the insert raises sqlite3.IntegrityError inside the transaction, which leaves it
    # as MemhubError(STORAGE) ("Methods raise MemhubError(STORAGE) on database failure").
    with pytest.raises(MemhubError), store.transaction(write=True) as tx:
        tx.insert_project("demo", "again", {}, "bob")
    with store.transaction(write=False) as tx:
        kept = tx.get_project_by_name("demo")
        assert kept is not None and (kept.id, kept.owner, kept.description) == (first, "alice", None)
        assert tx.list_projects("bob", 10) == []


def test_members_and_roles(store: Store, seed: Seed) -> None:
    project = seed.project("demo")
    with store.transaction(write=True) as tx:
        tx.set_member(project, "bob", ProjectRole.EDITOR)
        tx.set_member(project, "carol", ProjectRole.VIEWER)
        assert tx.member_role(project, "bob") is ProjectRole.EDITOR
        tx.set_member(project, "bob", ProjectRole.VIEWER)  # a second call changes the role
        assert tx.member_role(project, "bob") is ProjectRole.VIEWER
        assert tx.member_role(project, "dave") is None
    with store.transaction(write=False) as tx:
        members = {m.principal: m for m in tx.list_members(project)}
    assert {p: m.role for p, m in members.items()} == {
        "alice": ProjectRole.OWNER,
        "bob": ProjectRole.VIEWER,
        "carol": ProjectRole.VIEWER,
    }
    assert all(m.project_id == project and m.created_at for m in members.values())
    with store.transaction(write=True) as tx:
        assert tx.remove_member(project, "carol") is True
        assert tx.remove_member(project, "carol") is False
        assert tx.remove_member(project, "nobody") is False
        assert tx.member_role(project, "carol") is None
        assert {m.principal for m in tx.list_members(project)} == {"alice", "bob"}


def test_list_memberships_with_role_filters(store: Store, seed: Seed) -> None:
    owned = seed.project("owned", owner="bob")
    edited = seed.project("edited", members={"bob": ProjectRole.EDITOR})
    viewed = seed.project("viewed", members={"bob": ProjectRole.VIEWER})
    seed.project("foreign")
    with store.transaction(write=False) as tx:
        every = {p.id: role for p, role in tx.list_memberships("bob", [], 10)}
        writable = {
            p.id: role for p, role in tx.list_memberships("bob", [ProjectRole.OWNER, ProjectRole.EDITOR], 10)
        }
        owners = [p.id for p, _ in tx.list_memberships("bob", [ProjectRole.OWNER], 10)]
        limited = tx.list_memberships("bob", [], 2)
        listed = {p.id for p in tx.list_projects("bob", 10)}
        none = tx.list_memberships("nobody", [], 10)
    assert every == {owned: ProjectRole.OWNER, edited: ProjectRole.EDITOR, viewed: ProjectRole.VIEWER}
    assert writable == {owned: ProjectRole.OWNER, edited: ProjectRole.EDITOR}
    assert owners == [owned]
    assert len(limited) == 2
    assert listed == {owned, edited, viewed}
    assert none == []


def test_update_project(store: Store, seed: Seed) -> None:
    with store.transaction(write=True) as tx:
        before = tx.insert_project("demo", "first", {"k": 1}, "alice")
    with store.transaction(write=True) as tx:
        renamed = tx.update_project(before.id, "renamed", None)
    assert (renamed.id, renamed.name, renamed.description, renamed.attrs) == (
        before.id,
        "renamed",
        "first",
        {"k": 1},
    )
    assert renamed.created_at == before.created_at and renamed.updated_at > before.updated_at
    with store.transaction(write=True) as tx:
        described = tx.update_project(before.id, None, "second")
        assert tx.get_project_by_name("demo") is None
        assert tx.get_project_by_name("renamed") == described
    assert (described.name, described.description) == ("renamed", "second")


def test_delete_project_cascades_to_items_and_members(store: Store, seed: Seed) -> None:
    project = seed.project("doomed", members={"bob": ProjectRole.EDITOR})
    keep = seed.project("kept")
    topic = seed.item("project topic", kind="topic", scope="project", project_id=project)
    child = seed.item("its log", kind="log", scope="project", project_id=project, parent_id=topic.id)
    kept_item = seed.item("kept project item", scope="project", project_id=keep)
    glob = seed.item("global item")
    with store.transaction(write=True) as tx:
        tx.upsert_link(glob.id, topic.id, "relation", "about", 1.0)
        tx.delete_project(project)
    everyone = viewer("alice", boundaries=ALL_CLASSES)
    with store.transaction(write=False) as tx:
        assert tx.get_project(project) is None
        assert tx.get_project_by_name("doomed") is None
        assert tx.list_members(project) == []
        assert tx.member_role(project, "bob") is None
        assert tx.list_memberships("bob", [], 10) == []
        assert tx.item_owners([topic.id, child.id], ["topic", "log"]) == {}
        assert tx.norm_texts([topic.id, child.id]) == {}
        assert [r.id for r in tx.query_items(everyone, ItemQuery())] == [kept_item.id, glob.id]
        assert [i for i, _ in tx.text_search(everyone, ["project"], (), None, 10)] == [kept_item.id]
        assert tx.links_of([glob.id], []) == []
        assert tx.get_project(keep) is not None


def test_api_keys(store: Store) -> None:
    with store.transaction(write=True) as tx:
        tx.ensure_principal("alice")
        tx.ensure_principal("bob")
        assert tx.has_api_key("alice") is False
        tx.set_api_key("alice", "hash-a")
        tx.set_api_key("bob", "hash-b", role="admin")
    with store.transaction(write=True) as tx:
        alice = tx.principal_by_key("hash-a")
        bob = tx.principal_by_key("hash-b")
        assert alice is not None and (alice.id, alice.role) == ("alice", "admin")
        assert bob is not None and (bob.id, bob.role) == ("bob", "admin")
        assert tx.principal_by_key("hash-unknown") is None
        assert tx.has_api_key("alice") and tx.has_api_key("bob")
        assert tx.has_api_key("nobody") is False
        tx.set_api_key("bob", "hash-b2", role="member")  # rotate and demote
        tx.set_api_key("alice", None)  # revoke; the role stays
    with store.transaction(write=False) as tx:
        assert tx.principal_by_key("hash-a") is None
        assert tx.has_api_key("alice") is False
        revoked = tx.get_principal("alice")
        assert revoked is not None and revoked.role == "admin"
        assert tx.principal_by_key("hash-b") is None
        rotated = tx.principal_by_key("hash-b2")
        assert rotated is not None and (rotated.id, rotated.role) == ("bob", "member")


def test_sessions(store: Store, seed: Seed) -> None:
    project = seed.project("demo")
    with store.transaction(write=True) as tx:
        tx.ensure_principal("alice")
        first = tx.create_session("s1", "alice", "morning", project)
        created = tx.now
    with store.transaction(write=True) as tx:
        second = tx.create_session("s2", "alice", None, None)
        tx.create_session("b1", "bob", None, None)
    assert (first.id, first.principal, first.name, first.project_id) == ("s1", "alice", "morning", project)
    assert (first.status, first.created_at, first.ended_at) == ("active", created, None)
    assert (second.name, second.project_id, second.status) == (None, None, "active")
    with store.transaction(write=True) as tx:
        assert tx.get_session("s1") == first
        assert tx.get_session("nope") is None
        assert [s.id for s in tx.list_sessions("alice", 10)] == ["s2", "s1"]  # newest first
        assert [s.id for s in tx.list_sessions("alice", 1)] == ["s2"]
        assert [s.id for s in tx.list_sessions("bob", 10)] == ["b1"]
        ended = tx.end_session("s1")
        ended_at = tx.now
    assert (ended.id, ended.status, ended.ended_at) == ("s1", "ended", ended_at)
    with store.transaction(write=False) as tx:
        assert tx.get_session("s1") == ended
        still = tx.get_session("s2")
        assert still is not None and still.status == "active"


def test_current_session(store: Store, seed: Seed) -> None:
    seed.session("s1")
    with store.transaction(write=True) as tx:
        tx.ensure_principal("alice")
        tx.set_current_session("alice", "s1")
    with store.transaction(write=True) as tx:
        current = tx.get_principal("alice")
        assert current is not None and current.current_session_id == "s1"
        tx.set_current_session("alice", None)
    with store.transaction(write=False) as tx:
        cleared = tx.get_principal("alice")
        assert cleared is not None and cleared.current_session_id is None
