"""ItemsTx: insert, read, every ItemQuery filter, aggregates, update, delete, subtree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from memhub.core.models import ProjectRole
from memhub.core.text import search_terms
from memhub.store.base import ItemQuery, ItemRow, NewItem, Store
from tests.store.contract import VIEW_NOW, Seed, viewer

ALICE = viewer("alice")


def test_insert_and_get_round_trip(store: Store, seed: Seed) -> None:
    project = seed.project("demo")
    with store.transaction(write=True) as tx:
        row = tx.insert_item(
            NewItem(
                kind="decision",
                owner="alice",
                scope="project",
                body="Use SQLite",
                title="Storage",
                project_id=project,
                session_id="s1",
                boundary_class="public",
                status="accepted",
                tags=["db", "storage"],
                attrs={"why": "local-first", "n": 3},
                content_hash="abc",
                importance=0.75,
                expires_at="2099-01-01T00:00:00.000000Z",
                category="architecture",
            )
        )
        now = tx.now
    assert row.id > 0
    assert (row.kind, row.owner, row.scope, row.project_id, row.session_id, row.parent_id) == (
        "decision",
        "alice",
        "project",
        project,
        "s1",
        None,
    )
    assert (row.boundary_class, row.status, row.title, row.body) == (
        "public",
        "accepted",
        "Storage",
        "Use SQLite",
    )
    assert row.tags == ("db", "storage")
    assert row.attrs == {"why": "local-first", "n": 3}
    assert (row.content_hash, row.importance, row.category) == ("abc", 0.75, "architecture")
    assert (row.quality, row.access_count) == (0.0, 0)
    assert row.created_at == row.updated_at == now
    assert row.expires_at == "2099-01-01T00:00:00.000000Z"
    with store.transaction(write=False) as tx:
        assert tx.get_item(ALICE, row.id) == row
        assert tx.get_item(ALICE, row.id, kinds=["decision", "claim"]) == row
        assert tx.get_item(ALICE, row.id, kinds=["memory"]) is None
        assert tx.get_item(ALICE, row.id + 1000) is None
        assert tx.max_item_id() == row.id


def test_insert_keeps_given_times(store: Store, seed: Seed) -> None:
    """An import's items keep their original times: created_at, and updated_at (default: the
    given created_at); only an item without them takes the transaction's time."""
    created, updated = "2025-01-01T09:00:00.000000Z", "2025-02-01T09:00:00.000000Z"
    both = seed.item("both", created_at=created, updated_at=updated)
    only_created = seed.item("created", created_at=created)
    with store.transaction(write=True) as tx:
        fresh, now = tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="new")), tx.now
    assert (both.created_at, both.updated_at) == (created, updated)
    assert (only_created.created_at, only_created.updated_at) == (created, created)
    assert fresh.created_at == fresh.updated_at == now
    with store.transaction(write=False) as tx:
        assert tx.get_item(ALICE, both.id) == both


def test_empty_store(store: Store) -> None:
    with store.transaction(write=False) as tx:
        assert tx.max_item_id() == 0
        assert tx.query_items(ALICE, ItemQuery()) == []
        assert tx.count_items(ALICE, ItemQuery()) == 0
        assert tx.text_search(ALICE, ["anything"], (), None, 10) == []
    assert store.schema_version() >= 1
    assert isinstance(store.location, str)


@dataclass
class Catalog:
    ids: dict[str, int]
    rows: dict[str, ItemRow]
    project: int
    other_project: int

    def names(self, ids: list[int]) -> list[str]:
        by_id = {v: k for k, v in self.ids.items()}
        return [by_id[i] for i in ids]


@pytest.fixture
def catalog(store: Store, seed: Seed) -> Catalog:
    """Items visible to alice (except `bobs_user`), one transaction each: distinct created_at."""
    project = seed.project("demo")
    other = seed.project("other", owner="bob", members={"alice": ProjectRole.VIEWER})
    rows: dict[str, ItemRow] = {}
    rows["a"] = seed.item("Alpha Apple", tags=["x", "y"], category="fact", importance=0.2)
    rows["b"] = seed.item("Beta Banana", tags=["x"], category="pref", importance=0.9)
    rows["topic"] = seed.item("topic with a decision", kind="topic", title="Gamma")
    rows["log"] = seed.item("a log entry", kind="log", parent_id=rows["topic"].id)
    rows["decision"] = seed.item("the decision", kind="decision", parent_id=rows["topic"].id)
    rows["bare_topic"] = seed.item("undecided topic", kind="topic")
    rows["proj"] = seed.item("project memory", scope="project", project_id=project)
    rows["other_proj"] = seed.item("other project memory", owner="bob", scope="project", project_id=other)
    rows["sess"] = seed.item("session memory", scope="session", session_id="s1")
    rows["user"] = seed.item("user memory", scope="user")
    rows["bobs"] = seed.item("bob's global memory", owner="bob")
    rows["bobs_user"] = seed.item("bob's private memory", owner="bob", scope="user")
    return Catalog({k: r.id for k, r in rows.items()}, rows, project, other)


QueryCase = Callable[[Catalog], ItemQuery]

FILTER_CASES: list[tuple[str, QueryCase, list[str]]] = [
    ("kinds", lambda c: ItemQuery(kinds=["topic"]), ["topic", "bare_topic"]),
    ("kinds several", lambda c: ItemQuery(kinds=["log", "decision"]), ["log", "decision"]),
    ("project_id", lambda c: ItemQuery(project_id=c.project), ["proj"]),
    ("project_ids", lambda c: ItemQuery(project_ids=[c.project, c.other_project]), ["proj", "other_proj"]),
    ("parent_id", lambda c: ItemQuery(parent_id=c.ids["topic"]), ["log", "decision"]),
    (
        "top_level",
        lambda c: ItemQuery(kinds=["topic", "log", "decision"], top_level=True),
        ["topic", "bare_topic"],
    ),
    ("min_id", lambda c: ItemQuery(min_id=c.ids["bobs"]), ["bobs"]),
    ("contains normalised", lambda c: ItemQuery(contains=["alpha"]), ["a"]),
    ("contains substring", lambda c: ItemQuery(contains=["anan"]), ["b"]),
    ("contains title", lambda c: ItemQuery(contains=["gamma"]), ["topic"]),
    ("contains all", lambda c: ItemQuery(contains=["alpha", "apple"]), ["a"]),
    ("contains all, none", lambda c: ItemQuery(contains=["alpha", "banana"]), []),
    ("contains wildcards are plain", lambda c: ItemQuery(contains=["%"]), []),
    ("contains underscore is plain", lambda c: ItemQuery(contains=["_"]), []),
    ("with_child_kind", lambda c: ItemQuery(with_child_kind="decision"), ["topic"]),
    (
        "without_child_kind",
        lambda c: ItemQuery(kinds=["topic"], without_child_kind="decision"),
        ["bare_topic"],
    ),
    ("scopes", lambda c: ItemQuery(scopes=["user", "session"]), ["sess", "user"]),
    ("session_id", lambda c: ItemQuery(session_id="s1"), ["sess"]),
    ("owner", lambda c: ItemQuery(owner="bob"), ["other_proj", "bobs"]),
    ("ids empty", lambda c: ItemQuery(ids=[]), []),
    ("ids", lambda c: ItemQuery(ids=[c.ids["b"], c.ids["a"], c.ids["bobs_user"]]), ["a", "b"]),
    ("tags_any", lambda c: ItemQuery(tags_any=["y", "zzz"]), ["a"]),
    ("tags_any shared", lambda c: ItemQuery(tags_any=["x"]), ["a", "b"]),
    ("tags_all", lambda c: ItemQuery(tags_all=["x", "y"]), ["a"]),
    ("tags_all missing", lambda c: ItemQuery(tags_all=["x", "zzz"]), []),
    ("categories", lambda c: ItemQuery(categories=["pref", "nope"]), ["b"]),
    ("importance_min", lambda c: ItemQuery(importance_min=0.8), ["b"]),
    ("importance_max", lambda c: ItemQuery(importance_max=0.3), ["a"]),
    ("importance range", lambda c: ItemQuery(importance_min=0.2, importance_max=0.2), ["a"]),
    (
        "created range inclusive",
        lambda c: ItemQuery(created_from=c.rows["b"].created_at, created_to=c.rows["topic"].created_at),
        ["b", "topic"],
    ),
    (
        "scope_projects empty",
        lambda c: ItemQuery(scopes=["project", "user"], scope_projects=[]),
        ["user"],
    ),
    (
        "scope_projects",
        lambda c: ItemQuery(scopes=["project", "global"], kinds=["memory"], scope_projects=[c.other_project]),
        ["a", "b", "other_proj", "bobs"],
    ),
    ("limit", lambda c: ItemQuery(limit=2), ["a", "b"]),
    (
        "combined",
        lambda c: ItemQuery(kinds=["memory"], owner="alice", tags_any=["x"], importance_min=0.5),
        ["b"],
    ),
]


@pytest.mark.parametrize(("case", "make", "expected"), FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_query_filters(
    store: Store, catalog: Catalog, case: str, make: QueryCase, expected: list[str]
) -> None:
    query = make(catalog)
    with store.transaction(write=False) as tx:
        rows = tx.query_items(ALICE, query)
        briefs = tx.query_briefs(ALICE, query)
        count = tx.count_items(ALICE, query)
    assert catalog.names([r.id for r in rows]) == expected
    assert sorted(b.id for b in briefs) == sorted(r.id for r in rows)
    if query.limit >= len(catalog.ids):
        assert count == len(expected)


def test_query_without_filters_and_ids_none(store: Store, catalog: Catalog) -> None:
    everything = [k for k in catalog.ids if k != "bobs_user"]
    with store.transaction(write=False) as tx:
        assert catalog.names([r.id for r in tx.query_items(ALICE, ItemQuery())]) == everything
        assert catalog.names([r.id for r in tx.query_items(ALICE, ItemQuery(ids=None))]) == everything
        assert tx.count_items(ALICE, ItemQuery()) == len(everything)
        assert tx.count_items(ALICE, ItemQuery(), cap=3) == 3
        assert tx.count_items(ALICE, ItemQuery(), cap=1000) == len(everything)
        assert tx.count_items(ALICE, ItemQuery(kinds=["topic"]), cap=1) == 1


def test_query_orders(store: Store, catalog: Catalog) -> None:
    with store.transaction(write=False) as tx:
        rows = tx.query_items(ALICE, ItemQuery())
        by_order = {
            order: [r.id for r in tx.query_items(ALICE, ItemQuery(order=order))]
            for order in ("id_asc", "id_desc", "importance_desc", "created_desc")
        }
        first_two = [r.id for r in tx.query_items(ALICE, ItemQuery(order="importance_desc", limit=2))]
    assert by_order["id_asc"] == sorted(r.id for r in rows)
    assert by_order["id_desc"] == sorted((r.id for r in rows), reverse=True)
    assert by_order["importance_desc"] == [r.id for r in sorted(rows, key=lambda r: (-r.importance, -r.id))]
    assert by_order["created_desc"] == [
        r.id for r in sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)
    ]
    assert by_order["importance_desc"][0] == catalog.ids["b"]
    assert by_order["importance_desc"][-1] == catalog.ids["a"]
    assert first_two == by_order["importance_desc"][:2]


def test_query_briefs_carry_the_ranking_columns(store: Store, catalog: Catalog) -> None:
    with store.transaction(write=True) as tx:
        tx.touch_access({catalog.ids["sess"]: 2})
    with store.transaction(write=False) as tx:
        briefs = {b.id: b for b in tx.query_briefs(ALICE, ItemQuery(kinds=["memory"]))}
        rows = {r.id: r for r in tx.query_items(ALICE, ItemQuery(kinds=["memory"]))}
    assert set(briefs) == set(rows)
    for item_id, brief in briefs.items():
        row = rows[item_id]
        assert (
            brief.scope,
            brief.project_id,
            brief.session_id,
            brief.importance,
            brief.access_count,
            brief.created_at,
        ) == (row.scope, row.project_id, row.session_id, row.importance, row.access_count, row.created_at)
    assert briefs[catalog.ids["sess"]].access_count == 2


def test_group_and_tag_counts(store: Store, catalog: Catalog) -> None:
    with store.transaction(write=False) as tx:
        kinds = tx.group_counts(ALICE, ItemQuery(), "kind")
        scopes = tx.group_counts(ALICE, ItemQuery(kinds=["memory"]), "scope")
        owners = tx.group_counts(ALICE, ItemQuery(), "owner")
        tags = tx.tag_counts(ALICE, ItemQuery(), 10)
        top_tag = tx.tag_counts(ALICE, ItemQuery(), 1)
        tags_of_b = tx.tag_counts(ALICE, ItemQuery(ids=[catalog.ids["b"]]), 10)
        with pytest.raises(ValueError):
            tx.group_counts(ALICE, ItemQuery(), "body")
    assert kinds == {"memory": 7, "topic": 2, "log": 1, "decision": 1}
    assert scopes == {"global": 3, "project": 2, "session": 1, "user": 1}
    assert owners == {"alice": 9, "bob": 2}  # bob's user-scope item is not counted
    assert tags == {"x": 2, "y": 1}
    assert top_tag == {"x": 2}
    assert tags_of_b == {"x": 1}


def test_item_owners_and_norm_texts(store: Store, catalog: Catalog) -> None:
    ids = catalog.ids
    with store.transaction(write=False) as tx:
        owners = tx.item_owners([ids["a"], ids["bobs_user"], ids["topic"], 999_999], ["memory"])
        texts = tx.norm_texts([ids["a"], ids["topic"]])
    # unfiltered by visibility, filtered by kind; unknown ids are left out
    assert owners == {ids["a"]: "alice", ids["bobs_user"]: "bob"}
    assert set(texts) == {ids["a"], ids["topic"]}
    assert "alpha apple" in texts[ids["a"]]
    assert "gamma" in texts[ids["topic"]] and "topic with a decision" in texts[ids["topic"]]


def test_norm_texts_are_nfkc_casefolded(store: Store, seed: Seed) -> None:
    row = seed.item("ＦｕｌｌＷｉｄｔｈ ﾌﾟﾗﾝ", title="ÉCOLE")
    with store.transaction(write=False) as tx:
        text = tx.norm_texts([row.id])[row.id]
        found = tx.query_items(ALICE, ItemQuery(contains=["fullwidth", "プラン", "école"]))
    assert "fullwidth" in text and "プラン" in text and "école" in text
    assert [r.id for r in found] == [row.id]


def test_subtree_is_breadth_first_and_limited(store: Store, seed: Seed) -> None:
    root = seed.item("root", kind="topic")
    t1 = seed.item("child 1", kind="topic", parent_id=root.id)
    t3 = seed.item("grandchild", kind="topic", parent_id=t1.id)  # a smaller id than t2
    t2 = seed.item("child 2", kind="topic", parent_id=root.id)
    seed.item("a log of the root", kind="log", parent_id=root.id)
    hidden = seed.item("bob's child", kind="topic", parent_id=root.id, owner="bob", scope="user")
    with store.transaction(write=False) as tx:
        tree = [r.id for r in tx.subtree(ALICE, root.id, "topic", 100)]
        limited = [r.id for r in tx.subtree(ALICE, root.id, "topic", 3)]
        from_child = [r.id for r in tx.subtree(ALICE, t1.id, "topic", 100)]
        wrong_kind = tx.subtree(ALICE, root.id, "log", 100)
        bobs = [r.id for r in tx.subtree(viewer("bob"), root.id, "topic", 100)]
    assert tree == [root.id, t1.id, t2.id, t3.id]
    assert limited == [root.id, t1.id, t2.id]
    assert from_child == [t1.id, t3.id]
    assert wrong_kind == []
    assert hidden.id not in tree
    assert bobs[:2] == [root.id, t1.id] and hidden.id in bobs


def test_update_item_changes_columns_and_reindexes_text(store: Store, seed: Seed) -> None:
    row = seed.item("the quick brown fox", title="animals", tags=["old"])
    with store.transaction(write=True) as tx:
        updated = tx.update_item(
            row.id,
            {"body": "a lazy sleeping dog", "tags": ["new"], "importance": 0.9, "attrs": {"k": 1}},
        )
        now = tx.now
    assert (updated.body, updated.tags, updated.importance, updated.attrs) == (
        "a lazy sleeping dog",
        ("new",),
        0.9,
        {"k": 1},
    )
    assert updated.title == "animals"
    assert updated.created_at == row.created_at
    assert updated.updated_at == now > row.updated_at
    with store.transaction(write=False) as tx:
        assert tx.get_item(ALICE, row.id) == updated
        assert [i for i, _ in tx.text_search(ALICE, search_terms("dog"), (), None, 10)] == [row.id]
        assert [i for i, _ in tx.text_search(ALICE, search_terms("sleep"), (), None, 10)] == [row.id]
        assert tx.text_search(ALICE, search_terms("fox"), (), None, 10) == []
        assert [i for i, _ in tx.text_search(ALICE, search_terms("animals"), (), None, 10)] == [row.id]
        assert [r.id for r in tx.query_items(ALICE, ItemQuery(contains=["lazy"]))] == [row.id]
        assert tx.query_items(ALICE, ItemQuery(contains=["quick"])) == []
        assert [r.id for r in tx.query_items(ALICE, ItemQuery(tags_any=["new"]))] == [row.id]
        assert tx.query_items(ALICE, ItemQuery(tags_any=["old"])) == []
        assert tx.tag_counts(ALICE, ItemQuery(), 10) == {"new": 1}
        assert "lazy" in tx.norm_texts([row.id])[row.id]


def test_update_item_title_and_scope(store: Store, seed: Seed) -> None:
    row = seed.item("body text", title="first heading")
    with store.transaction(write=True) as tx:
        tx.update_item(row.id, {"title": "second heading", "scope": "user", "status": "archived"})
    with store.transaction(write=False) as tx:
        assert [i for i, _ in tx.text_search(ALICE, ["second"], (), None, 10)] == [row.id]
        assert tx.text_search(ALICE, ["first"], (), None, 10) == []
        assert tx.get_item(viewer("bob"), row.id) is None  # now user scope
        got = tx.get_item(ALICE, row.id)
        assert got is not None and (got.status, got.scope) == ("archived", "user")


@pytest.mark.parametrize("column", ["owner", "kind", "id", "created_at", "access_count", "no_such_column"])
def test_update_item_rejects_other_columns(store: Store, seed: Seed, column: str) -> None:
    row = seed.item("unchanged")
    with store.transaction(write=True) as tx, pytest.raises(ValueError):
        tx.update_item(row.id, {"body": "changed", column: "x"})
    with store.transaction(write=False) as tx:
        assert tx.get_item(ALICE, row.id) == row


def test_delete_items(store: Store, seed: Seed) -> None:
    keep = seed.item("keep this one")
    gone = [seed.item(f"delete me {n}") for n in range(3)]
    with store.transaction(write=True) as tx:
        assert tx.delete_items([gone[0].id, gone[1].id, 999_999]) == 2
        assert tx.delete_items([]) == 0
    with store.transaction(write=False) as tx:
        assert tx.get_item(ALICE, gone[0].id) is None
        assert [r.id for r in tx.query_items(ALICE, ItemQuery())] == [keep.id, gone[2].id]
        assert [i for i, _ in tx.text_search(ALICE, ["delete"], (), None, 10)] == [gone[2].id]
        assert tx.item_owners([g.id for g in gone], ["memory"]) == {gone[2].id: "alice"}
        assert tx.norm_texts([gone[0].id]) == {}
        assert tx.max_item_id() == gone[2].id


def test_delete_many_items(store: Store, seed: Seed) -> None:
    rows = seed.items(
        [NewItem(kind="memory", owner="alice", scope="global", body=f"n{n}") for n in range(1100)]
    )
    with store.transaction(write=True) as tx:
        assert tx.delete_items([r.id for r in rows[:1050]]) == 1050
    with store.transaction(write=False) as tx:
        assert tx.count_items(ALICE, ItemQuery()) == 50


def test_touch_access_adds_counts(store: Store, seed: Seed) -> None:
    a = seed.item("a")
    b = seed.item("b")
    with store.transaction(write=True) as tx:
        tx.touch_access({a.id: 2, b.id: 1, 999_999: 5})  # a missing item is skipped
    with store.transaction(write=True) as tx:
        tx.touch_access({a.id: 3})
        tx.touch_access({})
    with store.transaction(write=False) as tx:
        got_a = tx.get_item(ALICE, a.id)
        got_b = tx.get_item(ALICE, b.id)
    assert got_a is not None and got_a.access_count == 5
    assert got_b is not None and got_b.access_count == 1


def test_transaction_now_is_fixed_and_viewer_now_is_separate(store: Store) -> None:
    with store.transaction(write=True) as tx:
        first = tx.now
        row = tx.insert_item(NewItem(kind="memory", owner="alice", scope="global", body="x"))
        assert tx.now == first == row.created_at
    assert first < VIEW_NOW
