"""The visualize renderers: every format is valid, escapes hostile text, stays bounded and deterministic."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

import pytest

from memhub.services.assoc.render import (
    MAX_EDGES,
    MAX_NODES,
    MAX_POINTS,
    Format,
    GraphEdge,
    GraphNode,
    Rendering,
    Series,
    render_charts,
    render_graph,
)

FORMATS: list[Format] = ["html", "svg", "json", "graphviz"]
SVG = "{http://www.w3.org/2000/svg}"
LONG = "長い" * 2_500 + "x" * 5_000  # 10k characters
HOSTILE = [
    "<script>alert(1)</script>",
    '"quoted" \\ back\\slash',
    "]]> end of cdata",
    "--> <!-- comment",
    "first line\nsecond line\r\nthird",
    "{braces} } { and [brackets]",
    "日本語のメモ：会議は月曜日",
    "emoji 🎉🚀👩‍💻",
    "trailing backslash \\",
    "escapes \\n \\l \\N \\G literal",
    "control \x00\x07\x1b chars",
    LONG,
]
GROUPS = ["global", "user", "project", "session"]


def _display(text: str, limit: int = 60) -> str:
    """The one-line display label the renderers promise (whitespace collapsed, cut with "…")."""
    line = " ".join(text.split())
    line = line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
    return "".join("\ufffd" if ord(ch) < 0x20 else ch for ch in line)  # control characters are replaced


def realistic_graph() -> tuple[list[GraphNode], list[GraphEdge]]:
    texts = [
        "User prefers dark mode in every editor",
        "週次ミーティングは月曜10時",
        "Deploy with docker compose on staging",
        "API keys rotate every 90 days",
        "Prefers Python 3.11 and ruff",
        "タイムゾーンはJST",
        "Coffee order: flat white",
        "Project uses SQLite with WAL",
    ]
    nodes = [GraphNode("mem_1", "設計方針: SQLite を使う", "center", 0.9)]
    nodes += [GraphNode(f"mem_{i + 2}", t, GROUPS[i % 4], (i % 5) / 4) for i, t in enumerate(texts)]
    edges = [GraphEdge("mem_1", f"mem_{i}", "semantic", 0.2 + i / 10) for i in range(2, 6)]
    edges += [GraphEdge(f"mem_{i - 4}", f"mem_{i}", "temporal", 0.5) for i in range(6, 10)]
    return nodes, edges


def hostile_graph() -> tuple[list[GraphNode], list[GraphEdge]]:
    nodes = [GraphNode("mem_0", "<b>center</b>", "center", 1.0)]
    nodes += [GraphNode(f'id "{i}" \\ <x>', text, GROUPS[i % 4], 0.5) for i, text in enumerate(HOSTILE)]
    nodes.append(GraphNode("odd", "unknown group", '<g onload="x">', 0.3))
    edges = [GraphEdge("mem_0", n.id, '<edge> "kind" \\', 0.7) for n in nodes[1:]]
    return nodes, edges


def realistic_panels() -> list[Series]:
    return [
        Series("Memories per domain", [("global", 12.0), ("user", 30.0), ("project", 7.0), ("session", 0.0)]),
        Series("Memories per category", [(f"category {i}", float(i * 7 % 13)) for i in range(18)]),
        Series("Memories per day", [(f"2026-11-{d:02d}", float(d * 5 % 9)) for d in range(1, 31)], "line"),
    ]


def hostile_panels() -> list[Series]:
    return [
        Series("<script>alert(1)</script> panel", [(t, float(i)) for i, t in enumerate(HOSTILE)]),
        Series('line "panel" \\', [(t, float(-i)) for i, t in enumerate(HOSTILE)], "line"),
        Series("empty -->", []),
    ]


# --- format checks -----------------------------------------------------------------------------------


def parse_svg(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("viewBox") and float(root.get("width", "0")) > 0 and float(root.get("height", "0")) > 0
    lowered = svg.lower()
    for raw in ("<script", "<!--", "-->", "]]>", "<b>", "<x>", "<edge>", 'onload="'):
        assert raw not in lowered, raw
    return root


def svg_text(root: ET.Element) -> str:
    return "\n".join("".join(el.itertext()) for el in root.iter() if el.tag in (f"{SVG}text", f"{SVG}title"))


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.cells: list[str] = []
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "td":
            self._in_cell = True
            self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.cells[-1] += data


def check_html(page: str) -> _Cells:
    assert page.startswith("<!doctype html>")
    assert '<meta charset="utf-8">' in page and "<style>" in page and page.rstrip().endswith("</html>")
    start, end = page.index("<svg"), page.index("</svg>") + len("</svg>")
    parse_svg(page[start:end])  # the inline SVG is well-formed XML on its own
    lowered = page.lower()
    for raw in ("<script", "<!--", "<b>", "<x>", "<edge>", 'onload="'):
        assert raw not in lowered, raw
    assert "http" not in page.replace("http://www.w3.org/2000/svg", ""), "no external URLs"
    assert "src=" not in lowered and "<link" not in lowered
    parser = _Cells()
    parser.feed(page)
    assert "table" in parser.tags and "svg" in parser.tags and "caption" in parser.tags
    return parser


def check_json(text: str) -> dict[str, Any]:
    def no_constants(name: str) -> None:
        raise AssertionError(f"non-standard JSON constant {name}")

    data = json.loads(text, parse_constant=no_constants)
    assert isinstance(data, dict)
    return data


def scan_dot(src: str) -> list[str]:
    """Decoded quoted strings of a DOT source; asserts braces outside strings balance and every
    backslash inside a string starts one of the escapes the renderer emits (\\\\, \\", \\n)."""
    strings: list[str] = []
    depth, i = 0, 0
    while i < len(src):
        ch = src[i]
        if ch == '"':
            j, buf = i + 1, []
            while src[j] != '"':  # IndexError here = unterminated string
                assert src[j] != "\n", "raw newline inside a DOT string"
                if src[j] == "\\":
                    nxt = src[j + 1]
                    assert nxt in '\\"n', f"stray escape \\{nxt}"
                    buf.append({"\\": "\\", '"': '"', "n": "\n"}[nxt])
                    j += 2
                else:
                    buf.append(src[j])
                    j += 1
            strings.append("".join(buf))
            i = j + 1
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            assert depth >= 0, "unbalanced }"
        i += 1
    assert depth == 0, "unbalanced {"
    return strings


def check_dot(src: str, *, kind: str) -> list[str]:
    assert src.startswith(f"{kind} ") and src.rstrip().endswith("}")
    strings = scan_dot(src)
    if shutil.which("dot") is not None:
        done = subprocess.run(
            ["dot", "-Tsvg"], input=src.encode(), capture_output=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        assert b"syntax error" not in done.stderr
        ET.fromstring(done.stdout)  # Graphviz's own SVG is well-formed too
    return strings


# --- graphs --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("make", [realistic_graph, hostile_graph])
def test_graph_formats_are_valid(make: Any, fmt: Format) -> None:
    nodes, edges = make()
    result = render_graph('Memory map <around> "mem_1" & co', nodes, edges, fmt)
    assert isinstance(result, Rendering)
    assert (result.nodes, result.edges, result.truncated) == (len(nodes), len(edges), False)
    if fmt == "svg":
        root = parse_svg(result.content)
        assert len(root.findall(f".//{SVG}circle")) >= len(nodes)  # nodes plus legend swatches
        assert len(root.findall(f".//{SVG}line")) == len(edges)
        assert 'Memory map <around> "mem_1" & co' in svg_text(root)
    elif fmt == "html":
        check_html(result.content)
    elif fmt == "json":
        data = check_json(result.content)
        assert set(data) == {"title", "nodes", "edges", "truncated"}
        assert [n["id"] for n in data["nodes"]] == [n.id for n in nodes]
        assert data["truncated"] is False
    else:
        strings = check_dot(result.content, kind="graph")
        for n in nodes:
            assert n.id in strings
            assert _display(n.label) in strings


def test_graph_hostile_text_is_escaped_not_lost() -> None:
    nodes, edges = hostile_graph()
    text = svg_text(parse_svg(render_graph("t", nodes, edges, "svg").content))
    for needle in [
        "<script>alert(1)</script>",
        '"quoted" \\ back\\slash',
        "]]> end",
        "--> <!--",
        "日本語のメモ",
        "🎉🚀",
    ]:
        assert needle in text, needle
    assert "\x00" not in text and "\ufffd" in text  # control characters are replaced, not emitted
    assert '<g onload="x">' in text  # a hostile group name is shown as text in the legend

    cells = check_html(render_graph("t", nodes, edges, "html").content).cells
    assert "<script>alert(1)</script>" in cells and '"quoted" \\ back\\slash' in cells

    data = check_json(render_graph("t", nodes, edges, "json").content)
    labels = [n["label"] for n in data["nodes"]]
    assert "<script>alert(1)</script>" in labels and "first line\nsecond line\nthird" in labels
    long = next(lb for lb in labels if lb.startswith("長い"))
    assert len(long) <= 500 and long.endswith("…")

    strings = scan_dot(render_graph("t", nodes, edges, "graphviz").content)
    assert '"quoted" \\ back\\slash' in strings and "trailing backslash \\" in strings
    assert "escapes \\n \\l \\N \\G literal" in strings  # stays literal: backslashes are doubled


def test_long_labels_are_truncated_for_display() -> None:
    result = render_graph("t", [GraphNode("a", LONG, "user")], [], "svg")
    root = parse_svg(result.content)
    label = next(el.text or "" for el in root.iter(f"{SVG}text") if (el.text or "").startswith("長い"))
    assert len(label) <= 60 and label.endswith("…")
    tooltip = next(el.text or "" for el in root.iter(f"{SVG}title") if (el.text or "").startswith("長い"))
    assert len(tooltip) <= 500 + 40
    assert len(result.content) < 5_000


def test_svg_layout_puts_center_in_the_middle_and_is_deterministic() -> None:
    nodes, edges = realistic_graph()
    svg = render_graph("t", nodes, edges, "svg").content
    assert '<circle cx="0.0" cy="0.0"' in svg  # the centre node, inside the translated group
    for fmt in FORMATS:
        first = render_graph("t", nodes, edges, fmt)
        assert render_graph("t", list(nodes), list(edges), fmt) == first


def test_graph_colours_fixed_per_group_with_fallback_cycle() -> None:
    nodes = [
        GraphNode(f"n{i}", f"n{i}", g) for i, g in enumerate(["global", "user", "alpha", "beta", "global"])
    ]
    svg = render_graph("t", nodes, [], "svg").content
    assert svg.count('fill="#1f77b4"') >= 2 and 'fill="#2ca02c"' in svg
    other = render_graph("t", list(reversed(nodes)), [], "svg").content
    assert 'fill="#1f77b4"' in other and 'fill="#2ca02c"' in other  # named groups keep their colour


@pytest.mark.parametrize("fmt", FORMATS)
def test_graph_truncates_to_limits_and_stays_small(fmt: Format) -> None:
    nodes = [
        GraphNode(f"mem_{i}", f"memory number {i} " + "text " * 30, GROUPS[i % 4], 0.5) for i in range(500)
    ]
    nodes[0] = GraphNode("mem_0", "centre", "center", 1.0)
    edges = [GraphEdge(f"mem_{i}", f"mem_{(i * 7 + 1) % 500}", "semantic", 0.5) for i in range(2_000)]
    result = render_graph("big", nodes, edges, fmt)
    assert result.nodes == MAX_NODES and result.edges <= MAX_EDGES and result.truncated
    assert len(result.content.encode()) < 300_000
    if fmt == "svg":
        assert len(parse_svg(result.content).findall(f".//{SVG}line")) == result.edges
    elif fmt == "json":
        data = check_json(result.content)
        kept = {n["id"] for n in data["nodes"]}
        assert kept == {f"mem_{i}" for i in range(MAX_NODES)} and data["truncated"] is True
        assert all(e["src"] in kept and e["dst"] in kept for e in data["edges"])
    elif fmt == "html":
        check_html(result.content)
    else:
        check_dot(result.content, kind="graph")


@pytest.mark.parametrize("fmt", FORMATS)
def test_hostile_labels_at_the_node_limit_stay_bounded(fmt: Format) -> None:
    nodes = [GraphNode(f"n{i}", '<&">' * 2_500, "user") for i in range(MAX_NODES)]
    result = render_graph("t", nodes, [], fmt)
    assert len(result.content.encode()) < 400_000  # 5-6x escaping expansion on every character


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_graph_renders(fmt: Format) -> None:
    result = render_graph("nothing here", [], [], fmt)
    assert (result.nodes, result.edges, result.truncated) == (0, 0, False)
    if fmt == "svg":
        assert "no data" in svg_text(parse_svg(result.content))
    elif fmt == "html":
        assert "no data" in check_html(result.content).cells
    elif fmt == "json":
        assert check_json(result.content) == {
            "title": "nothing here",
            "nodes": [],
            "edges": [],
            "truncated": False,
        }
    else:
        check_dot(result.content, kind="graph")


def test_graph_ignores_dangling_edges_and_bad_numbers() -> None:
    nodes = [
        GraphNode("a", "a", "user", math.nan),
        GraphNode("b", "b", "user", math.inf),
        GraphNode("a", "dup", "x"),
    ]
    edges = [GraphEdge("a", "b", "ok", math.nan), GraphEdge("a", "missing"), GraphEdge("a", "a", "self", -3)]
    result = render_graph("t", nodes, edges, "json")
    data = check_json(result.content)
    assert [n["label"] for n in data["nodes"]] == ["a", "b"]
    assert [(e["src"], e["dst"], e["weight"]) for e in data["edges"]] == [("a", "b", 1.0), ("a", "a", 0.0)]
    assert not result.truncated
    parse_svg(render_graph("t", nodes, edges, "svg").content)


def test_unknown_format_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown format"):
        render_graph("t", [], [], "png")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown format"):
        render_charts("t", [], "pdf")  # type: ignore[arg-type]


# --- charts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("make", [realistic_panels, hostile_panels])
def test_chart_formats_are_valid(make: Any, fmt: Format) -> None:
    panels = make()
    result = render_charts("memhub <statistics>", panels, fmt)
    points = sum(len(p.points) for p in panels)
    assert (result.nodes, result.edges, result.truncated) == (points, 0, False)
    if fmt == "svg":
        root = parse_svg(result.content)
        text = svg_text(root)
        assert "memhub <statistics>" in text and all(p.title in text for p in panels)
        bars = sum(len(p.points) for p in panels if p.kind == "bar")
        assert len(root.findall(f".//{SVG}rect")) == bars + 1  # plus the background
        assert len(root.findall(f".//{SVG}polyline")) == sum(p.kind == "line" for p in panels)
        assert all(float(r.get("height", "0")) >= 0 for r in root.iter(f"{SVG}rect"))
    elif fmt == "html":
        parser = check_html(result.content)
        assert parser.tags.count("table") == len(panels)
    elif fmt == "json":
        data = check_json(result.content)
        assert set(data) == {"title", "panels", "truncated"}
        assert [p["kind"] for p in data["panels"]] == [p.kind for p in panels]
        assert [len(p["points"]) for p in data["panels"]] == [len(p.points) for p in panels]
        assert set(data["panels"][0]["points"][0]) == {"label", "value"}
    else:
        src = result.content
        strings = check_dot(src, kind="digraph")
        assert src.count("subgraph cluster_") == len(panels)
        assert all(p.title in strings for p in panels if "\\" not in p.title)


def test_chart_hostile_text_is_escaped_not_lost() -> None:
    panels = hostile_panels()
    text = svg_text(parse_svg(render_charts("t", panels, "svg").content))
    assert "<script>alert(1)</script>: 0" in text  # the bar tooltip
    assert "no data" in text  # the empty panel
    cells = check_html(render_charts("t", panels, "html").content).cells
    assert "<script>alert(1)</script>" in cells and "]]> end of cdata" in cells
    strings = scan_dot(render_charts("t", panels, "graphviz").content)
    assert '"quoted" \\ back\\slash: 1' in strings and 'line "panel" \\' in strings
    data = check_json(render_charts("t", panels, "json").content)
    assert data["panels"][1]["points"][3]["value"] == -3  # JSON keeps the value; drawing clamps it


def test_chart_values_zero_negative_and_non_finite() -> None:
    panel = Series("odd", [("zero", 0.0), ("neg", -5.0), ("nan", math.nan), ("inf", math.inf), ("big", 1e9)])
    for fmt in FORMATS:
        render_charts("t", [panel, Series("zeros", [("a", 0.0)], "line")], fmt)
    data = check_json(render_charts("t", [panel], "json").content)
    assert [p["value"] for p in data["panels"][0]["points"]] == [
        0.0,
        -5.0,
        0.0,
        0.0,
        1e9,
    ]  # non-finite becomes 0
    root = parse_svg(render_charts("t", [panel], "svg").content)
    assert all(float(r.get("height", "0")) >= 0 for r in root.iter(f"{SVG}rect"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_charts_truncate_points_and_stay_small(fmt: Format) -> None:
    panels = [
        Series(
            "days", [(f"2026-{i // 28 + 1:02d}-{i % 28 + 1:02d}", float(i % 17)) for i in range(300)], "line"
        ),
        Series("categories", [(f"category {i} " + "x" * 200, float(i)) for i in range(300)]),
    ]
    result = render_charts("big", panels, fmt)
    assert result.nodes == MAX_POINTS and result.truncated
    assert len(result.content.encode()) < 300_000
    if fmt == "svg":
        parse_svg(result.content)
    elif fmt == "graphviz":
        check_dot(result.content, kind="digraph")


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_charts_render(fmt: Format) -> None:
    for panels in ([], [Series("nothing", [])]):
        result = render_charts("empty", panels, fmt)
        assert (result.nodes, result.truncated) == (0, False)
        if fmt == "svg":
            assert "no data" in svg_text(parse_svg(result.content))
        elif fmt == "html":
            check_html(result.content)
        elif fmt == "json":
            assert check_json(result.content)["panels"] == [
                {"title": p.title, "kind": "bar", "points": []} for p in panels
            ]
        else:
            check_dot(result.content, kind="digraph")


def test_charts_are_deterministic() -> None:
    for fmt in FORMATS:
        assert render_charts("t", realistic_panels(), fmt) == render_charts("t", realistic_panels(), fmt)


def test_svg_and_html_name_cjk_fonts() -> None:
    """Japanese labels render with real glyphs (not empty boxes) wherever a CJK face exists."""
    nodes = [GraphNode("1", "設計方針", "global", 1.0), GraphNode("2", "データベース", "global", 0.5)]
    edges = [GraphEdge("1", "2", "semantic", 0.8)]
    for fmt in ("svg", "html"):
        graph = render_graph("記憶マップ", nodes, edges, fmt).content
        charts = render_charts("カテゴリ", [Series("件数", [("設計", 3.0)])], fmt).content
        for text in (graph, charts):
            for face in ("Hiragino Sans", "Yu Gothic", "Noto Sans CJK JP"):
                assert face in text, (fmt, face)
