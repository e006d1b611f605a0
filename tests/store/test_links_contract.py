"""LinksTx: one edge per (src, dst, type, subtype), the stronger strength kept, both directions."""

from __future__ import annotations

import pytest

from memhub.store.base import Store
from tests.store.contract import Seed


@pytest.mark.parametrize("subtype", ["semantic", None])
def test_upsert_keeps_one_edge_with_the_stronger_strength(
    store: Store, seed: Seed, subtype: str | None
) -> None:
    a = seed.item("a")
    b = seed.item("b")
    with store.transaction(write=True) as tx:
        tx.upsert_link(a.id, b.id, "association", subtype, 0.3)
        now = tx.now
    with store.transaction(write=True) as tx:
        tx.upsert_link(a.id, b.id, "association", subtype, 0.7)
        tx.upsert_link(a.id, b.id, "association", subtype, 0.5)
    with store.transaction(write=False) as tx:
        links = tx.links_of([a.id], [])
    assert [(x.src, x.dst, x.type, x.subtype, x.strength) for x in links] == [
        (a.id, b.id, "association", subtype, 0.7)
    ]
    assert links[0].created_at == now


def test_edges_differ_by_type_subtype_and_direction(store: Store, seed: Seed) -> None:
    a = seed.item("a")
    b = seed.item("b")
    with store.transaction(write=True) as tx:
        tx.upsert_link(a.id, b.id, "association", "semantic", 0.4)
        tx.upsert_link(a.id, b.id, "association", "temporal", 0.6)
        tx.upsert_link(a.id, b.id, "supersedes", None, 1.0)
        tx.upsert_link(b.id, a.id, "association", "semantic", 0.2)
        links = tx.links_of([a.id], [])
    assert sorted((x.src, x.dst, x.type, x.subtype) for x in links) == sorted(
        [
            (a.id, b.id, "association", "semantic"),
            (a.id, b.id, "association", "temporal"),
            (a.id, b.id, "supersedes", None),
            (b.id, a.id, "association", "semantic"),
        ]
    )
    assert len({x.id for x in links}) == 4


def test_links_of_both_directions_and_type_filter(store: Store, seed: Seed) -> None:
    a, b, c, d = (seed.item(name) for name in "abcd")
    with store.transaction(write=True) as tx:
        tx.upsert_link(a.id, b.id, "association", "semantic", 0.9)
        tx.upsert_link(c.id, a.id, "relation", "cites", 0.5)
        tx.upsert_link(b.id, c.id, "association", "semantic", 0.4)
        tx.upsert_link(d.id, d.id, "wiki", None, 1.0)
    with store.transaction(write=False) as tx:
        of_a = {(x.src, x.dst) for x in tx.links_of([a.id], [])}
        of_a_assoc = {(x.src, x.dst) for x in tx.links_of([a.id], ["association"])}
        of_a_rel = {(x.src, x.dst) for x in tx.links_of([a.id], ["relation", "wiki"])}
        ab = tx.links_of([a.id, b.id], [])
        of_ab = {(x.src, x.dst) for x in ab}
        of_none = tx.links_of([], [])
        of_unknown = tx.links_of([999_999], [])
        of_b_other_type = tx.links_of([b.id], ["supersedes"])
    assert of_a == {(a.id, b.id), (c.id, a.id)}
    assert of_a_assoc == {(a.id, b.id)}
    assert of_a_rel == {(c.id, a.id)}
    assert of_ab == {(a.id, b.id), (c.id, a.id), (b.id, c.id)}
    assert len(ab) == 3  # an edge between two of the ids is listed once
    assert of_none == [] and of_unknown == [] and of_b_other_type == []


def test_links_vanish_with_their_items(store: Store, seed: Seed) -> None:
    a, b, c = (seed.item(name) for name in "abc")
    with store.transaction(write=True) as tx:
        tx.upsert_link(a.id, b.id, "association", "semantic", 0.9)
        tx.upsert_link(c.id, b.id, "relation", None, 0.5)
        tx.upsert_link(a.id, c.id, "relation", None, 0.5)
    with store.transaction(write=True) as tx:
        tx.delete_items([b.id])
    with store.transaction(write=False) as tx:
        assert tx.links_of([b.id], []) == []
        assert [(x.src, x.dst) for x in tx.links_of([a.id, c.id], [])] == [(a.id, c.id)]
