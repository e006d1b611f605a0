"""The single visibility filter, seen through every read of ItemsTx: scope x principal,
the session rule, boundary classes (fail closed), expiry, and visible_ids at scale."""

from __future__ import annotations

import pytest

from memhub.core.models import ProjectRole, Viewer
from memhub.store.base import ItemQuery, NewItem, Store, Tx
from tests.store.contract import ALL_CLASSES, FUTURE, PAST, Seed, viewer


def sees(tx: Tx, who: Viewer, item_id: int, word: str) -> bool:
    """Whether `who` reads the item, asserting every read path agrees."""
    by_get = tx.get_item(who, item_id) is not None
    by_query = [r.id for r in tx.query_items(who, ItemQuery(ids=[item_id]))] == [item_id]
    by_brief = [b.id for b in tx.query_briefs(who, ItemQuery(ids=[item_id]))] == [item_id]
    by_count = tx.count_items(who, ItemQuery(ids=[item_id])) == 1
    by_ids = tx.visible_ids(who, [item_id], (), None) == {item_id}
    by_text = item_id in {i for i, _ in tx.text_search(who, [word], (), None, 10)}
    by_tags = tx.tag_counts(who, ItemQuery(ids=[item_id]), 10) == {word: 1}
    by_group = tx.group_counts(who, ItemQuery(ids=[item_id]), "scope") != {}
    paths = [by_get, by_query, by_brief, by_count, by_ids, by_text, by_tags, by_group]
    assert len(set(paths)) == 1, f"read paths disagree for item {item_id}: {paths}"
    return by_get


SCOPE_CASES = [
    # (scope, viewer, visible): alice owns every item; bob is a member of the project, carol is not
    ("global", "alice", True),
    ("global", "bob", True),
    ("global", "carol", True),
    ("user", "alice", True),
    ("user", "bob", False),
    ("user", "carol", False),
    ("session", "alice", True),
    ("session", "bob", False),
    ("session", "carol", False),
    ("project", "alice", True),
    ("project", "bob", True),
    ("project", "carol", False),
]


@pytest.mark.parametrize(("scope", "who", "visible"), SCOPE_CASES)
def test_scope_by_principal(store: Store, seed: Seed, scope: str, who: str, visible: bool) -> None:
    project = seed.project("demo", members={"bob": ProjectRole.VIEWER})
    fields: dict[str, object] = {"scope": scope}
    if scope == "project":
        fields["project_id"] = project
    if scope == "session":
        fields["session_id"] = "s1"
    row = seed.item("marker text", tags=["marker"], **fields)
    with store.transaction(write=False) as tx:
        assert sees(tx, viewer(who), row.id, "marker") is visible


def test_project_visibility_follows_membership_not_ownership(store: Store, seed: Seed) -> None:
    project = seed.project("demo", members={"bob": ProjectRole.EDITOR})
    row = seed.item("written by bob", owner="bob", scope="project", project_id=project, tags=["bobs"])
    with store.transaction(write=False) as tx:
        assert sees(tx, viewer("bob"), row.id, "bobs")
        assert sees(tx, viewer("alice"), row.id, "bobs")  # a member sees what another member wrote
    with store.transaction(write=True) as tx:
        assert tx.remove_member(project, "bob")
    with store.transaction(write=False) as tx:
        assert not sees(tx, viewer("bob"), row.id, "bobs")  # the owner of the item lost access
        assert sees(tx, viewer("alice"), row.id, "bobs")
    with store.transaction(write=True) as tx:
        tx.set_member(project, "carol", ProjectRole.VIEWER)
    with store.transaction(write=False) as tx:
        assert sees(tx, viewer("carol"), row.id, "bobs")


def test_session_rule_own_and_current(store: Store, seed: Seed) -> None:
    s1 = seed.item("first session", scope="session", session_id="s1", tags=["one"])
    s2 = seed.item("second session", scope="session", session_id="s2", tags=["two"])
    glob = seed.item("global note", tags=["glob"])
    user = seed.item("user note", scope="user", tags=["mine"])
    own = viewer("alice", sessions="own")
    own_with_session = viewer("alice", session_id="s1", sessions="own")
    current = viewer("alice", session_id="s1", sessions="current")
    current_none = viewer("alice", session_id=None, sessions="current")
    bob_current = viewer("bob", session_id="s1", sessions="current")
    with store.transaction(write=False) as tx:
        assert sees(tx, own, s1.id, "one") and sees(tx, own, s2.id, "two")
        assert sees(tx, own_with_session, s1.id, "one") and sees(tx, own_with_session, s2.id, "two")
        assert sees(tx, current, s1.id, "one")
        assert not sees(tx, current, s2.id, "two")
        assert not sees(tx, current_none, s1.id, "one")
        assert not sees(tx, current_none, s2.id, "two")
        assert not sees(tx, bob_current, s1.id, "one")  # the same session id, another principal
        for who in (current, current_none):  # the rule touches session items only
            assert sees(tx, who, glob.id, "glob") and sees(tx, who, user.id, "mine")


BOUNDARY_CASES = [
    (None, {"public", "internal"}),  # the default: fail closed
    (frozenset({"public", "internal", "pii"}), {"public", "internal", "pii"}),
    (frozenset({"secret"}), {"secret"}),
    (ALL_CLASSES, set(ALL_CLASSES)),
    (frozenset(), set()),  # nothing allowed: nothing seen, not everything
]


@pytest.mark.parametrize(
    ("boundaries", "expected"), BOUNDARY_CASES, ids=["default", "pii", "secret", "all", "none"]
)
def test_boundary_classes(
    store: Store, seed: Seed, boundaries: frozenset[str] | None, expected: set[str]
) -> None:
    rows = {
        cls: seed.item(f"classified {cls}", boundary_class=cls, tags=[cls]) for cls in sorted(ALL_CLASSES)
    }
    who = viewer("alice", boundaries=boundaries)
    with store.transaction(write=False) as tx:
        seen = {cls for cls, row in rows.items() if sees(tx, who, row.id, cls)}
        listed = {r.boundary_class for r in tx.query_items(who, ItemQuery())}
        hits = {i for i, _ in tx.text_search(who, ["classified"], (), None, 10)}
        tag_totals = tx.tag_counts(who, ItemQuery(), 10)
        total = tx.count_items(who, ItemQuery())
    assert seen == expected
    assert listed == expected
    assert hits == {rows[cls].id for cls in expected}
    assert set(tag_totals) == expected
    assert total == len(expected)


def test_default_viewer_boundaries_are_public_and_internal() -> None:
    assert Viewer(principal="alice", now="2030-01-01T00:00:00.000000Z").boundaries == {"public", "internal"}


def test_expired_items_are_invisible(store: Store, seed: Seed) -> None:
    expired = seed.item("expired note", expires_at=PAST, tags=["old"])
    alive = seed.item("alive note", expires_at=FUTURE, tags=["new"])
    with store.transaction(write=False) as tx:
        assert not sees(tx, viewer("alice"), expired.id, "old")
        assert sees(tx, viewer("alice"), alive.id, "new")
        # expiry is judged at the viewer's `now`
        assert sees(tx, viewer("alice", now="2019-01-01T00:00:00.000000Z"), expired.id, "old")
        assert not sees(tx, viewer("alice", now="2100-01-01T00:00:00.000000Z"), alive.id, "new")
        assert not sees(tx, viewer("alice", boundaries=ALL_CLASSES), expired.id, "old")


def test_get_item_by_id_respects_visibility(store: Store, seed: Seed) -> None:
    secret = seed.item("top secret", boundary_class="secret")
    private = seed.item("mine only", scope="user")
    with store.transaction(write=False) as tx:
        assert tx.get_item(viewer("alice"), secret.id) is None
        assert tx.get_item(viewer("alice", boundaries=ALL_CLASSES), secret.id) == secret
        assert tx.get_item(viewer("bob", boundaries=ALL_CLASSES), private.id) is None


def test_visible_ids_over_many_ids(store: Store, seed: Seed) -> None:
    project = seed.project("demo")
    news: list[NewItem] = []
    for n in range(1300):
        kind = "memory" if n % 2 == 0 else "topic"
        if n % 5 == 0:
            news.append(NewItem(kind=kind, owner="bob", scope="user", body=f"hidden {n}"))
        elif n % 3 == 0:
            news.append(NewItem(kind=kind, owner="alice", scope="project", project_id=project, body=f"p {n}"))
        else:
            news.append(NewItem(kind=kind, owner="alice", scope="global", body=f"g {n}"))
    rows = seed.items(news)
    ids = [r.id for r in rows] + [10_000_000 + n for n in range(10)]  # unknown ids are left out
    alice = viewer("alice")
    visible = {r.id for r in rows if r.owner == "alice"}
    memories = {r.id for r in rows if r.owner == "alice" and r.kind == "memory"}
    in_project = {r.id for r in rows if r.project_id == project}
    with store.transaction(write=False) as tx:
        assert tx.visible_ids(alice, ids, (), None) == visible
        assert tx.visible_ids(alice, ids, ["memory"], None) == memories
        assert tx.visible_ids(alice, ids, (), project) == in_project
        assert tx.visible_ids(alice, ids, ["memory"], project) == in_project & memories
        assert tx.visible_ids(alice, list(reversed(ids)), ["memory", "topic"], None) == visible
        assert tx.visible_ids(alice, [], (), None) == set()
        assert tx.visible_ids(viewer("bob"), ids, (), project) == set()
        assert tx.visible_ids(viewer("alice", boundaries=frozenset()), ids, (), None) == set()
