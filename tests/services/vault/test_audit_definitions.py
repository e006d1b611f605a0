"""The definitions behind artifact_audit: nodes, citations, rooting, links (pure functions)."""

from __future__ import annotations

from memhub.services.vault.audit import citations, front_matter_ranges, parse_nodes
from memhub.services.vault.links import Link, has_anchor, links
from memhub.services.vault.notes import loose_query, sections, split_lines

ARTIFACT = """---
source_lines: 12-30, 40-52
---
# 要約

冒頭の段落は見出しに属する。

## ストレージ

- SQLite を使う (L12-L15)
  - WAL モード
    続きの行
- 二つ目の項目
1. numbered item
- [ ] a task item

```
- not an item inside code
# not a heading
```
## 空の節
"""


def test_nodes_are_headings_and_list_items_in_a_tree() -> None:
    nodes = parse_nodes(split_lines(ARTIFACT))
    assert [(n.id, n.heading) for n in nodes] == [
        ("L4", True), ("L8", True), ("L10", False), ("L11", False), ("L13", False), ("L14", False),
        ("L15", False), ("L21", True),
    ]  # fmt: skip
    by_id = {n.id: n for n in nodes}
    assert by_id["L4"].counted is True  # has a paragraph of its own
    assert by_id["L8"].counted is False and by_id["L21"].counted is False  # structure only
    assert [nodes[i].id for i in by_id["L8"].children] == ["L10", "L13", "L14", "L15"]
    assert [nodes[i].id for i in by_id["L10"].children] == ["L11"]
    assert by_id["L11"].text == "WAL モード\n続きの行"
    assert by_id["L15"].text == "a task item"
    assert by_id["L8"].parent is not None and nodes[by_id["L8"].parent].id == "L4"


def test_citation_forms() -> None:
    assert citations("see L12") == [(12, 12)]
    assert citations("(L12-L30) and L40–45") == [(12, 30), (40, 45)]
    assert citations("lines 3-5, line 9") == [(3, 5), (9, 9)]
    assert citations("12-30行目と 7行目") == [(12, 30), (7, 7)]
    assert citations("L30-L12") == [(12, 30)]
    assert citations("HTML5 and URL2 are not citations") == []


def test_source_lines_front_matter_forms() -> None:
    assert front_matter_ranges(split_lines(ARTIFACT)) == [(12, 30), (40, 52)]
    listed = "---\nsource_lines:\n  - 1-4\n  - [10, 12]\ntitle: x\n---\nbody\n"
    assert front_matter_ranges(split_lines(listed)) == [(1, 4), (10, 12)]
    nested = "---\nsource_lines: [[1, 3], [5, 5]]\n---\n"
    assert front_matter_ranges(split_lines(nested)) == [(1, 3), (5, 5)]
    assert front_matter_ranges(split_lines("no front matter\nsource_lines: 1-2\n")) == []


def test_obsidian_links() -> None:
    found = links(
        [
            "[[note]] [[folder/note|alias]] [[note#Heading]] [[#Local]] ![[image.png]] [[note#^block1]]",
            "[md](other%20note.md) [site](https://example.com) [rel](../up.md#part)",
            "```",
            "[[inside code]]",
            "```",
        ]
    )
    assert [(x.target, x.anchor, x.block, x.markdown) for x in found] == [
        ("note", None, False, False),
        ("folder/note", None, False, False),
        ("note", "Heading", False, False),
        ("", "Local", False, False),
        ("image.png", None, False, False),
        ("note", "block1", True, False),
        ("other note.md", None, False, True),
        ("../up.md", "part", False, True),
    ]
    lines = ["# Title", "## Heading", "a line ^block1"]
    assert has_anchor(lines, Link(1, "n", "heading", False, False))
    assert has_anchor(lines, Link(1, "n", "block1", True, False))
    assert not has_anchor(lines, Link(1, "n", "Missing", False, False))


def test_sections_and_loose_keys() -> None:
    lines = split_lines("---\ntags: [x]\n---\npreamble\n# A\ntext\n```\n# not a heading\n```\n## B\nmore\n")
    assert [(s.start, s.end, s.heading) for s in sections(lines)] == [
        (1, 3, None), (4, 4, None), (5, 9, "A"), (10, 11, "B"),
    ]  # fmt: skip
    query = loose_query("リンゴを保存する deploying")
    assert query.terms == (("りん", "んご"), ("保存",), ("deploy",))
    assert query.score("りんごの保存 deployment") == 1.0
    assert 0 < query.score("りんご") < 0.5
