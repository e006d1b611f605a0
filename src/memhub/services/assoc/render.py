"""Pure renderers for the `visualize` tool: graphs and charts as SVG, HTML, JSON or Graphviz DOT.

No I/O and no state. User text is cleaned (control characters and lone surrogates become U+FFFD),
truncated, and escaped for each format. Outputs are bounded: MAX_NODES / MAX_EDGES / MAX_POINTS /
MAX_PANELS, 60-character display labels, and long text (tooltips, JSON and table labels) of at most
500 characters per node and about `_TEXT_BUDGET` characters per graph. Layouts are deterministic.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Format = Literal["html", "svg", "json", "graphviz"]


@dataclass(frozen=True)
class GraphNode:
    id: str
    label: str
    group: str
    size: float = 1.0


@dataclass(frozen=True)
class GraphEdge:
    src: str
    dst: str
    label: str = ""
    weight: float = 1.0


@dataclass(frozen=True)
class Series:
    title: str
    points: list[tuple[str, float]]
    kind: Literal["bar", "line"] = "bar"


@dataclass(frozen=True)
class Rendering:
    content: str
    nodes: int
    edges: int
    truncated: bool


MAX_NODES = 200
MAX_EDGES = 600
MAX_POINTS = 400
MAX_PANELS = 24
LABEL_CHARS = 60
TOOLTIP_CHARS = 500
_TEXT_BUDGET = 20_000  # long-text characters per graph: 500 per node up to 40 nodes, 100 at 200
_ID_CHARS = 40  # ids are server-made (mem_12, proj_3, domain:global); cut anyway
_CHART = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#17becf")
_PALETTE = dict(zip(("global", "project", "user", "session", "center"), _CHART, strict=False))
_FALLBACK = ("#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#393b79")
_SVG_NS = "http://www.w3.org/2000/svg"
_PAD = 20.0
_PX = 11.0  # graph label font size
# Japanese labels need CJK faces: Hiragino (macOS), Yu Gothic (Windows), Noto Sans CJK JP (Linux).
_FONTS = (
    "system-ui, DejaVu Sans, Hiragino Sans, Hiragino Kaku Gothic ProN, Yu Gothic, "
    "Noto Sans CJK JP, Noto Sans JP, Meiryo, sans-serif"
)
_NO_DATA = 'font-size="12" font-style="italic" fill="#777">no data</text>'
_CSS = (
    f"body{{font-family:{_FONTS};margin:1.5rem;color:#222;background:#fff}}"
    "h1{font-size:1.4rem}.viz{margin:0 0 1.5rem;overflow:auto;border:1px solid #ddd}"
    "table{border-collapse:collapse;margin:0 0 1.5rem;font-size:.9rem}"
    "caption{text-align:left;font-weight:bold;padding:.3rem 0}"
    "th,td{border:1px solid #ccc;padding:.2rem .5rem;text-align:left;vertical-align:top;"
    "max-width:40rem;overflow-wrap:anywhere}th{background:#f3f3f3}td.n{text-align:right}"
    ".swatch{display:inline-block;width:.8em;height:.8em;border-radius:50%;margin-right:.3em}"
)
_PAGE = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{css}</style></head>
<body><main>
<h1>{title}</h1>
<p>{note}</p>
<div class="viz">{svg}</div>
{tables}
</main></body>
</html>
"""

# --- text and small helpers ------------------------------------------------------------------------


def _xml_ok(ch: str) -> bool:
    o = ord(ch)
    bad = o < 0x20 or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xDFFF or o in (0xFFFE, 0xFFFF)
    return o in (9, 10, 13) or not bad


def _clean(text: str, limit: int, *, one_line: bool = True) -> str:
    """At most `limit` characters ("…" marks a cut), valid in XML, JSON and DOT."""
    head = text[: limit * 4 + 8]
    cut = len(head) < len(text)
    head = " ".join(head.split()) if one_line else head.replace("\r\n", "\n").replace("\r", "\n")
    if cut or len(head) > limit:
        head = head[: limit - 1].rstrip() + "…"
    return "".join(ch if _xml_ok(ch) else "\ufffd" for ch in head)


def _x(text: str) -> str:
    return html.escape(text, quote=True)


def _dot(text: str) -> str:
    """A DOT quoted string; `\\` is doubled so no escape sequence (\\n, \\l, \\N…) is ever formed."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "")
    return f'"{body}"'


def _num(value: float, lo: float, hi: float, default: float) -> float:
    v = float(value)
    return min(hi, max(lo, v)) if math.isfinite(v) else default


def _fmt(value: float) -> str:
    v = float(value)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:.6g}"


def _f(v: float) -> str:
    return f"{v:.1f}"


def _width(text: str, px: float) -> float:
    """Estimated rendered width: East Asian and emoji characters are ~1 em, others ~0.6 em."""
    return sum(px if ord(ch) >= 0x1100 else px * 0.6 for ch in text)


def _fit(text: str, max_px: float, px: float) -> str:
    if _width(text, px) <= max_px:
        return text
    used, out = _width("…", px), []
    for ch in text:
        used += _width(ch, px)
        if used > max_px:
            break
        out.append(ch)
    return "".join(out).rstrip() + "…"


def _colours(groups: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for g in groups:
        if g not in out:
            out[g] = _PALETTE.get(g) or _FALLBACK[sum(k not in _PALETTE for k in out) % len(_FALLBACK)]
    return out


def _tint(colour: str, t: float = 0.75) -> str:
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * t):02x}" for c in rgb)


def _make(fmt: str, makers: dict[str, Callable[[], str]]) -> str:
    if fmt not in makers:
        raise ValueError(f"unknown format {fmt!r}; expected one of {sorted(makers)}")
    return makers[fmt]()


def _page(title: str, svg: str, tables: list[str], note: str, truncated: bool) -> str:
    note += " (truncated: limits dropped data)." if truncated else "."
    return _PAGE.format(title=_x(title), css=_CSS, note=_x(note), svg=svg, tables="\n".join(tables))


def _table(caption: str, headers: list[str], rows: list[list[str]], numeric: int) -> str:
    """`rows` cells are already-escaped HTML; column `numeric` is right-aligned."""
    head = "".join(f'<th scope="col">{_x(h)}</th>' for h in headers)
    cell = ["<td>{}</td>"] * len(headers)
    cell[numeric] = '<td class="n">{}</td>'
    cells = ["".join(cell[i].format(c) for i, c in enumerate(r)) for r in rows]
    body = "\n".join(f"<tr>{c}</tr>" for c in cells) or f'<tr><td colspan="{len(headers)}">no data</td></tr>'
    head = f"<caption>{_x(caption)}</caption>\n<thead><tr>{head}</tr></thead>"
    return f"<table>\n{head}\n<tbody>\n{body}\n</tbody>\n</table>"


def _svg(title: str, width: float, height: float, body: list[str]) -> str:
    w, h = math.ceil(width), math.ceil(height)
    head = (
        f'<svg xmlns="{_SVG_NS}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        f'font-family="{_FONTS}">\n<title>{_x(title)}</title>\n'
        f'<rect width="{w}" height="{h}" fill="#fff"/>\n'
        f'<text x="{_f(_PAD)}" y="26" font-size="16" font-weight="bold" fill="#222">{_x(title)}</text>'
    )
    return "\n".join([head, *body, "</svg>"])


# --- graphs ----------------------------------------------------------------------------------------


def _prepare_graph(
    nodes: list[GraphNode], edges: list[GraphEdge]
) -> tuple[list[GraphNode], list[GraphEdge], bool]:
    """Cleaned copies: unique ids, labels cut to the long-text budget, sizes/weights clamped."""
    truncated = len(nodes) > MAX_NODES
    first: dict[str, GraphNode] = {}
    for n in nodes[:MAX_NODES]:
        first.setdefault(_clean(n.id, _ID_CHARS), n)
    budget = max(LABEL_CHARS, min(TOOLTIP_CHARS, _TEXT_BUDGET // max(1, len(first))))
    labels = {i: _clean(n.label, budget, one_line=False) for i, n in first.items()}
    kept = [
        GraphNode(i, labels[i], _clean(n.group, 40) or "-", _num(n.size, 0, 2, 1)) for i, n in first.items()
    ]
    out: list[GraphEdge] = []
    for e in edges:
        src, dst = _clean(e.src, _ID_CHARS), _clean(e.dst, _ID_CHARS)
        if src in first and dst in first:
            if len(out) == MAX_EDGES:
                return kept, out, True
            out.append(GraphEdge(src, dst, _clean(e.label, 24), _num(e.weight, 0, 1, 1)))
    return kept, out, truncated


def _short(n: GraphNode) -> str:
    return _clean(n.label, LABEL_CHARS)


@dataclass(frozen=True)
class _Pos:
    x: float
    y: float
    r: float
    angle: float
    radial: bool  # label drawn along the radius (crowded rings) instead of under the node
    text: str


def _rings(nodes: list[GraphNode], edges: list[GraphEdge]) -> tuple[int | None, list[list[int]], list[int]]:
    """The centre (first "center" node), rings of node indexes by BFS distance, and BFS parents."""
    index = {n.id: i for i, n in enumerate(nodes)}
    adj: list[list[int]] = [[] for _ in nodes]
    for e in edges:
        adj[index[e.src]].append(index[e.dst])
        adj[index[e.dst]].append(index[e.src])
    parent = [-1] * len(nodes)
    centre = next((i for i, n in enumerate(nodes) if n.group == "center"), None)
    if centre is None:
        return None, [list(range(len(nodes)))] if nodes else [], parent
    dist = [-1] * len(nodes)
    dist[centre] = 0
    queue = [centre]
    for i in queue:
        for j in adj[i]:
            if dist[j] < 0:
                dist[j], parent[j] = dist[i] + 1, i
                queue.append(j)
    rings = [[i for i, d in enumerate(dist) if d == k] for k in range(1, max(dist) + 1)]
    rings.append([i for i, d in enumerate(dist) if d < 0])  # unreachable: outermost ring
    return centre, [r for r in rings if r], parent


def _layout(nodes: list[GraphNode], edges: list[GraphEdge]) -> list[_Pos]:
    """Centre in the middle, others on concentric rings (children near their parent's angle)."""
    radius = [5.0 + 7.0 * n.size for n in nodes]
    centre, rings, parent = _rings(nodes, edges)
    pos: dict[int, _Pos] = {}
    outer = 0.0
    if centre is not None:
        pos[centre] = _Pos(0.0, 0.0, radius[centre], 0.0, False, _fit(_short(nodes[centre]), 170, _PX))
        outer = max(radius[centre] + 24.0, 90.0)
    for members in rings:
        ring = sorted(members, key=lambda i: (pos[parent[i]].angle if parent[i] in pos else 99.0, i))
        big = max(radius[i] for i in ring)
        radial = len(ring) > 10
        spacing = max(16.0, 2 * big + 4) if radial else 180.0
        r = max(outer + big + 24.0, len(ring) * spacing / (2 * math.pi)) if pos or len(ring) > 1 else 0.0
        texts = [_fit(_short(nodes[i]), 170.0, _PX) for i in ring]
        for k, (i, text) in enumerate(zip(ring, texts, strict=True)):
            a = -math.pi / 2 + 2 * math.pi * k / len(ring)
            pos[i] = _Pos(r * math.cos(a), r * math.sin(a), radius[i], a, radial, text)
        outer = r + (max(_width(t, _PX) for t in texts) + big + 8 if radial else 90.0)
    return [pos[i] for i in range(len(nodes))]


def _label_box(p: _Pos) -> tuple[float, float, float, float]:
    w = _width(p.text, _PX)
    if not p.radial:
        return p.x - w / 2, p.y + p.r + 2, p.x + w / 2, p.y + p.r + 17
    ex, ey = p.x + (p.r + 6 + w) * math.cos(p.angle), p.y + (p.r + 6 + w) * math.sin(p.angle)
    return min(p.x, ex) - 7, min(p.y, ey) - 7, max(p.x, ex) + 7, max(p.y, ey) + 7


def _label_svg(p: _Pos) -> str:
    if not p.radial:
        return f'<text x="{_f(p.x)}" y="{_f(p.y + p.r + 14)}" text-anchor="middle">{_x(p.text)}</text>'
    deg, anchor = math.degrees(p.angle), "start"
    if math.cos(p.angle) < -1e-9:  # left half: flip so the text reads left to right
        deg, anchor = deg - 180.0, "end"
    tx, ty = p.x + (p.r + 5) * math.cos(p.angle), p.y + (p.r + 5) * math.sin(p.angle)
    where = f'transform="translate({_f(tx)},{_f(ty)}) rotate({_f(deg)})" dy=".35em"'
    return f'<text {where} text-anchor="{anchor}">{_x(p.text)}</text>'


def _legend(groups: dict[str, str], y: float, max_w: float) -> tuple[list[str], float, float]:
    parts, x, widest = [], _PAD, 0.0
    for g, colour in groups.items():
        text = _fit(g, 160, 12)
        w = 26 + _width(text, 12)
        if x + w > max_w and x > _PAD:
            x, y = _PAD, y + 20
        parts.append(f'<circle cx="{_f(x + 6)}" cy="{_f(y - 4)}" r="6" fill="{colour}"/>')
        parts.append(f'<text x="{_f(x + 16)}" y="{_f(y)}" font-size="12" fill="#333">{_x(text)}</text>')
        x += w
        widest = max(widest, x)
    return parts, y, widest


def _graph_svg(title: str, nodes: list[GraphNode], edges: list[GraphEdge]) -> str:
    colours = _colours([n.group for n in nodes])
    places = _layout(nodes, edges)
    boxes = [(p.x - p.r, p.y - p.r, p.x + p.r, p.y + p.r) for p in places] + [_label_box(p) for p in places]
    boxes = boxes or [(-60.0, -20.0, 60.0, 10.0)]
    x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    cw, ch = max(b[2] for b in boxes) - x0, max(b[3] for b in boxes) - y0
    width = max(cw + 2 * _PAD, _width(title, 16) * 1.1 + 2 * _PAD, 360.0)
    legend, last_y, legend_w = _legend(colours, 52.0, width - _PAD)
    width = max(width, legend_w + _PAD)
    top = (last_y + 16) if legend else 44.0
    dx, dy = _PAD - x0 + (width - 2 * _PAD - cw) / 2, top + _PAD - y0
    body = [*legend, f'<g transform="translate({_f(dx)},{_f(dy)})">']
    if not nodes:
        body.append(f'<text x="0" y="0" text-anchor="middle" {_NO_DATA}')
    at = {n.id: p for n, p in zip(nodes, places, strict=True)}
    body.append('<g stroke="#777" stroke-linecap="round">')
    for e in edges:
        a, b = at[e.src], at[e.dst]
        what = f"{_clean(e.src, 24)} — {_clean(e.dst, 24)}" + (f": {e.label}" if e.label else "")
        what += f" ({_fmt(round(e.weight, 2))})"
        ends = f'x1="{_f(a.x)}" y1="{_f(a.y)}" x2="{_f(b.x)}" y2="{_f(b.y)}"'
        look = f'stroke-width="{0.6 + 3.4 * e.weight:.2f}" stroke-opacity="{0.25 + 0.6 * e.weight:.2f}"'
        body.append(f"<line {ends} {look}><title>{_x(what)}</title></line>")
    body.append(
        f'</g>\n<g font-size="{_f(_PX)}" fill="#222" stroke="#fff" stroke-width="3" '
        'stroke-linejoin="round" paint-order="stroke">'
    )
    for n, p in zip(nodes, places, strict=True):
        circle = f'<circle cx="{_f(p.x)}" cy="{_f(p.y)}" r="{_f(p.r)}" fill="{colours[n.group]}"/>'
        body.append(f"<g><title>{_x(n.label)} [{_x(n.id)}, {_x(n.group)}]</title>{circle}{_label_svg(p)}</g>")
    return _svg(title, width, top + ch + 2 * _PAD, [*body, "</g>", "</g>"])


def _graph_dot(title: str, nodes: list[GraphNode], edges: list[GraphEdge]) -> str:
    colours = _colours([n.group for n in nodes])
    lines = [
        "graph memhub {",
        f'  graph [label={_dot(title)}, labelloc="t", fontsize=16, fontname="sans-serif"];',
        '  node [shape=box, style="rounded,filled", fontname="sans-serif", fontsize=10];',
        '  edge [fontname="sans-serif", fontsize=8, fontcolor="#555555"];',
    ]
    if not nodes:
        lines.append('  "(empty)" [label="no data", shape=plaintext, style=""];')
    for n in nodes:
        c = colours[n.group]
        lines.append(
            f"  {_dot(n.id)} [label={_dot(_short(n))}, tooltip={_dot(n.label)}, color={_dot(c)}, "
            f"fillcolor={_dot(_tint(c))}, fontsize={9 + 5 * min(n.size, 1.0):.1f}];"
        )
    for e in edges:
        alpha = f"{round(64 + 191 * e.weight):02x}"
        lines.append(
            f"  {_dot(e.src)} -- {_dot(e.dst)} [label={_dot(e.label)}, penwidth={0.6 + 3.4 * e.weight:.2f}, "
            f'color="#555555{alpha}"];'
        )
    return "\n".join([*lines, "}", ""])


def _graph_html(title: str, nodes: list[GraphNode], edges: list[GraphEdge], truncated: bool) -> str:
    colours = _colours([n.group for n in nodes])
    swatch = '<span class="swatch" style="background:{}"></span>'
    node_rows = [
        [_x(n.id), _x(n.label), swatch.format(colours[n.group]) + _x(n.group), _fmt(round(n.size, 3))]
        for n in nodes
    ]
    edge_rows = [[_x(e.src), _x(e.dst), _x(e.label), _fmt(round(e.weight, 3))] for e in edges]
    tables = [
        _table("Nodes", ["id", "label", "group", "size"], node_rows, 3),
        _table("Edges", ["from", "to", "type", "weight"], edge_rows, 3),
    ]
    note = f"{len(nodes)} nodes, {len(edges)} edges"
    return _page(title, _graph_svg(title, nodes, edges), tables, note, truncated)


def render_graph(title: str, nodes: list[GraphNode], edges: list[GraphEdge], fmt: Format) -> Rendering:
    """Render a node/edge graph; nodes beyond MAX_NODES (and their edges) are dropped."""
    name = _clean(title, 200)
    kept, links, truncated = _prepare_graph(nodes, edges)
    data = {
        "title": name,
        "nodes": [{"id": n.id, "label": n.label, "group": n.group, "size": n.size} for n in kept],
        "edges": [{"src": e.src, "dst": e.dst, "label": e.label, "weight": e.weight} for e in links],
        "truncated": truncated,
    }
    content = _make(
        fmt,
        {
            "svg": lambda: _graph_svg(name, kept, links),
            "html": lambda: _graph_html(name, kept, links, truncated),
            "graphviz": lambda: _graph_dot(name, kept, links),
            "json": lambda: json.dumps(data, ensure_ascii=False, indent=1),
        },
    )
    return Rendering(content, len(kept), len(links), truncated)


# --- charts ----------------------------------------------------------------------------------------


def _prepare_charts(panels: list[Series]) -> tuple[list[Series], bool]:
    truncated, left, out = len(panels) > MAX_PANELS, MAX_POINTS, []
    for s in panels[:MAX_PANELS]:
        pts = [(_clean(label, LABEL_CHARS), _num(v, -1e300, 1e300, 0.0)) for label, v in s.points[:left]]
        truncated = truncated or len(s.points) > left
        left -= len(pts)
        out.append(Series(_clean(s.title, 200), pts, "line" if s.kind == "line" else "bar"))
    return out, truncated


def _ticks(top_value: float) -> tuple[float, float]:
    """A 'nice' axis maximum and step (1, 2, 2.5 or 5 times a power of ten) for [0, top_value]."""
    if top_value <= 0:
        return 1.0, 0.25
    mag = 10 ** math.floor(math.log10(top_value / 5))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag * 5 >= top_value)
    return float(step * math.ceil(top_value / step - 1e-9)), float(step)


def _panel_svg(p: Series, colour: str, y: float) -> tuple[list[str], float, float]:
    """SVG for one panel whose top is at `y`; returns (parts, width, height)."""
    parts = [
        f'<g transform="translate(0,{_f(y)})">',
        f'<text x="{_f(_PAD)}" y="16" font-size="14" font-weight="bold" fill="#222">{_x(p.title)}</text>',
    ]
    if not p.points:
        return [*parts, f'<text x="40" y="46" {_NO_DATA}', "</g>"], _width(p.title, 14) + 2 * _PAD, 60.0
    n = len(p.points)
    plot_w = max(360.0, n * (56.0 if n <= 12 else 28.0 if n <= 40 else 10.0))
    slot = plot_w / n
    values = [max(0.0, v) for _, v in p.points]  # negative values are drawn as 0
    top, step = _ticks(max(values))
    labels = [_fit(label, 110, 10) for label, _ in p.points]
    lw = [_width(t, 10) for t in labels]
    flat = max(lw) + 6 <= slot  # else x labels are rotated (and thinned out when crowded)
    every = 1 if flat else max(1, math.ceil(13 / slot))
    vals = [_fmt(v) for _, v in p.points]
    vw = max(_width(t, 9) for t in vals)
    show = p.kind == "bar" or n <= 60
    vflat = vw + 4 <= slot
    head = 32.0 + (0.0 if not show else 12.0 if vflat else vw + 6)
    ticks = [i * step for i in range(round(top / step) + 1)]
    left = max(44.0, max(_width(_fmt(t), 10) for t in ticks) + 16, 0 if flat else lw[0] * 0.77 - slot / 2 + 8)
    plot_h, base = 180.0, head + 180.0
    below = 18.0 if flat else max(lw[::every]) * 0.65 + 16

    def sy(v: float) -> float:
        return base - plot_h * min(v, top) / top

    for t in ticks:
        ty = _f(sy(t))
        parts.append(f'<line x1="{_f(left)}" x2="{_f(left + plot_w)}" y1="{ty}" y2="{ty}" stroke="#e5e5e5"/>')
        where = f'x="{_f(left - 6)}" y="{_f(sy(t) + 3.5)}" text-anchor="end"'
        parts.append(f'<text {where} font-size="10" fill="#555">{_fmt(t)}</text>')
    xs = [left + slot * (i + 0.5) for i in range(n)]
    if p.kind == "line":
        pts = " ".join(f"{_f(x)},{_f(sy(v))}" for x, v in zip(xs, values, strict=True))
        area = f"{_f(xs[0])},{_f(base)} {pts} {_f(xs[-1])},{_f(base)}"
        parts.append(f'<polygon points="{area}" fill="{_tint(colour, 0.8)}" stroke="none"/>')
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
    for i, (x, v) in enumerate(zip(xs, values, strict=True)):
        tip = f"<title>{_x(p.points[i][0])}: {vals[i]}</title>"
        if p.kind == "line":
            parts.append(f'<circle cx="{_f(x)}" cy="{_f(sy(v))}" r="3" fill="{colour}">{tip}</circle>')
        else:
            box = f'x="{_f(x - slot * 0.35)}" y="{_f(sy(v))}" width="{_f(slot * 0.7)}"'
            parts.append(f'<rect {box} height="{_f(base - sy(v))}" fill="{colour}">{tip}</rect>')
        if show:
            vy = sy(v) - (5 if p.kind == "line" else 3)
            where = f'x="{_f(x)}" y="{_f(vy)}" text-anchor="middle"'
            if not vflat:
                where = f'transform="translate({_f(x)},{_f(vy)}) rotate(-90)" dy=".35em" text-anchor="start"'
            parts.append(f'<text {where} font-size="9" fill="#333">{vals[i]}</text>')
        if i % every == 0:
            where = f'x="{_f(x)}" y="{_f(base + 14)}" text-anchor="middle"'
            if not flat:
                where = f'transform="translate({_f(x)},{_f(base + 10)}) rotate(-40)" text-anchor="end"'
            parts.append(f'<text {where} font-size="10" fill="#333">{_x(labels[i])}</text>')
    axis = (
        f'<path d="M{_f(left)},{_f(head - 4)} V{_f(base)} H{_f(left + plot_w)}" fill="none" stroke="#444"/>'
    )
    width = max(left + plot_w + _PAD, _width(p.title, 14) + 2 * _PAD)
    return [*parts, axis, "</g>"], width, base + below + 8


def _charts_svg(title: str, panels: list[Series]) -> str:
    body = [] if panels else [f'<text x="{_f(_PAD)}" y="70" {_NO_DATA}']
    y, width = 44.0 if panels else 90.0, _width(title, 16) * 1.1 + 2 * _PAD
    for i, p in enumerate(panels):
        parts, w, h = _panel_svg(p, _CHART[i % len(_CHART)], y)
        body += parts
        y, width = y + h + 16, max(width, w)
    return _svg(title, max(width, 360.0), y, body)


def _charts_dot(title: str, panels: list[Series]) -> str:
    """Each panel is a cluster column of boxes whose widths follow the values (a bar chart)."""
    lines = [
        "digraph charts {",
        f'  graph [label={_dot(title)}, labelloc="t", fontsize=16, fontname="sans-serif", nodesep=0.15, '
        "ranksep=0.12];",
        '  node [shape=box, style=filled, fontname="sans-serif", fontsize=10, height=0.3];',
        "  edge [style=invis];",
    ]
    if not panels:
        lines.append('  "(empty)" [label="no data", shape=plaintext, style=""];')
    for i, p in enumerate(panels):
        c = _CHART[i % len(_CHART)]
        lines += [f"  subgraph cluster_{i} {{", f"    label={_dot(p.title)};", f"    color={_dot(c)};"]
        if not p.points:
            lines.append(f'    "p{i}_0" [label="no data", shape=plaintext, style=""];')
        top = max([v for _, v in p.points] + [0.0]) or 1.0
        for j, (label, v) in enumerate(p.points):
            width = 0.6 + 3.4 * max(0.0, v) / top
            lines.append(
                f'    "p{i}_{j}" [label={_dot(f"{label}: {_fmt(v)}")}, fillcolor={_dot(_tint(c, 0.6))}, '
                f"width={width:.2f}];"
            )
        lines += [f'    "p{i}_{j - 1}" -> "p{i}_{j}";' for j in range(1, len(p.points))]
        lines.append("  }")
    return "\n".join([*lines, "}", ""])


def _charts_html(title: str, panels: list[Series], truncated: bool) -> str:
    note = f"{len(panels)} panels, {sum(len(p.points) for p in panels)} points"
    tables = [
        _table(p.title or "(untitled)", ["label", "value"], [[_x(lb), _fmt(v)] for lb, v in p.points], 1)
        for p in panels
    ] or [_table(title, ["label", "value"], [], 1)]
    return _page(title, _charts_svg(title, panels), tables, note, truncated)


def render_charts(title: str, panels: list[Series], fmt: Format) -> Rendering:
    """Render bar/line chart panels stacked vertically; points beyond MAX_POINTS are dropped."""
    name = _clean(title, 200)
    kept, truncated = _prepare_charts(panels)
    data = {
        "title": name,
        "panels": [
            {"title": p.title, "kind": p.kind, "points": [{"label": lb, "value": v} for lb, v in p.points]}
            for p in kept
        ],
        "truncated": truncated,
    }
    content = _make(
        fmt,
        {
            "svg": lambda: _charts_svg(name, kept),
            "html": lambda: _charts_html(name, kept, truncated),
            "graphviz": lambda: _charts_dot(name, kept),
            "json": lambda: json.dumps(data, ensure_ascii=False, indent=1),
        },
    )
    return Rendering(content, sum(len(p.points) for p in kept), 0, truncated)
