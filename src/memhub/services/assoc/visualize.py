"""The `visualize` tool: gathers what the caller may see and hands it to `render`.

memory_map      the associations around one memory, to `depth` hops (a graph);
domain_graph    domains and projects as nodes, associations between them as weighted edges;
stats_dashboard counts by domain, by category, top tags and memories per day (charts);
timeline        memories per day (or per month for long ranges) within `time_range`;
category_chart  memories per category.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import invalid
from memhub.core.ids import MEM, PROJ
from memhub.core.models import Kind
from memhub.services import access, graph
from memhub.services.assoc import domains
from memhub.services.assoc import models as m
from memhub.services.assoc.memories import ASSOCIATION
from memhub.services.assoc.render import GraphEdge, GraphNode, Rendering, Series, render_charts, render_graph
from memhub.services.runtime import Call
from memhub.store.base import ItemQuery, ItemRow, Tx

MAP_NODES = 150
SCAN = 50_000  # memories read for charts; beyond it charts say truncated


def _where(args: m.VisualizeInput) -> ItemQuery:
    query = domains.memories_in(args.target_domain, args.project_id, args.session_id, SCAN + 1)
    if args.time_range is not None:
        try:
            start = isoformat(parse_iso(args.time_range.start)) if args.time_range.start else None
            end = isoformat(parse_iso(args.time_range.end)) if args.time_range.end else None
        except ValueError:
            raise invalid("time_range start/end must be ISO-8601 date-times") from None
        query = replace(query, created_from=start, created_to=end)
    return query


def _label(text: str) -> str:
    line = " ".join(text.split())
    return line[:80] + ("…" if len(line) > 80 else "")


def _memory_map(tx: Tx, call: Call, args: m.VisualizeInput) -> Rendering:
    if args.center_memory_id is None:
        raise invalid("center_memory_id is required for a memory_map")
    center = domains.get_memory(tx, call.principal, args.center_memory_id)
    viewer = access.viewer(tx, call.principal)
    walked = graph.walk(
        tx, viewer, [center.id], [ASSOCIATION], depth=args.depth, kinds=(Kind.MEMORY,), max_nodes=MAP_NODES
    )
    seen = sorted(walked.reached)
    rows = {r.id: r for r in tx.query_items(viewer, ItemQuery(ids=seen, limit=len(seen)))}
    nodes = [
        GraphNode(MEM(r.id), _label(r.body), "center" if r.id == center.id else r.scope, r.importance)
        for r in sorted(rows.values(), key=lambda r: (r.id != center.id, r.id))
    ]
    edges = {(e.src, e.dst, str(e.subtype)): e.strength for e in walked.edges.values()}
    graph_edges = [
        GraphEdge(MEM(s), MEM(d), kind, w) for (s, d, kind), w in edges.items() if s in rows and d in rows
    ]
    return render_graph(f"Memory map around {MEM(center.id)}", nodes, graph_edges, args.format)


def _domain_graph(tx: Tx, call: Call, args: m.VisualizeInput) -> Rendering:
    viewer = access.viewer(tx, call.principal)
    rows = tx.query_items(viewer, _where(args))

    def group(r: ItemRow) -> str:
        return (
            PROJ(r.project_id) if r.scope == "project" and r.project_id is not None else f"domain:{r.scope}"
        )

    where_of = {r.id: group(r) for r in rows[:SCAN]}
    sizes = Counter(where_of.values())
    names = {}
    for key in sizes:
        if key.startswith(PROJ.prefix):
            project = tx.get_project(PROJ.require(key))
            names[key] = f"project {project.name}" if project else key
        else:
            names[key] = key.removeprefix("domain:") + " domain"
    weights: Counter[tuple[str, str]] = Counter()
    ids = list(where_of)
    for start in range(0, len(ids), 500):
        for link in tx.links_of(ids[start : start + 500], [ASSOCIATION]):
            a, b = where_of.get(link.src), where_of.get(link.dst)
            if a and b and a != b:
                weights[tuple(sorted((a, b)))] += 1  # type: ignore[index]
    top = max(sizes.values(), default=1)
    nodes = [
        GraphNode(k, f"{names[k]} ({n})", k.split(":")[-1] if k.startswith("domain:") else "project", n / top)
        for k, n in sorted(sizes.items())
    ]
    heaviest = max(weights.values(), default=1)
    edges = [GraphEdge(a, b, f"{n} associations", n / heaviest) for (a, b), n in sorted(weights.items())]
    result = render_graph("Domains and projects", nodes, edges, args.format)
    return replace(result, truncated=result.truncated or len(rows) > SCAN)


def _per_day(created: list[str]) -> list[tuple[str, float]]:
    days = Counter(c[:10] for c in created)
    if len(days) > 120:
        days = Counter(c[:7] for c in created)  # months
    return [(k, float(v)) for k, v in sorted(days.items())]


def _charts(tx: Tx, call: Call, args: m.VisualizeInput) -> Rendering:
    viewer = access.viewer(tx, call.principal)
    where = _where(args)
    if args.type == "category_chart":
        counts = tx.group_counts(viewer, where, "category")
        panels = [Series("Memories per category", [(k or "(none)", float(v)) for k, v in counts.items()])]
        return render_charts("Categories", panels, args.format)
    rows = tx.query_items(viewer, where)
    truncated = len(rows) > SCAN
    created = [r.created_at for r in rows[:SCAN]]
    if args.type == "timeline":
        result = render_charts(
            "Timeline", [Series("Memories stored", _per_day(created), "line")], args.format
        )
        return replace(result, truncated=result.truncated or truncated)
    by_domain = tx.group_counts(viewer, where, "scope")
    by_category = tx.group_counts(viewer, where, "category")
    panels = [
        Series("Memories per domain", [(k, float(v)) for k, v in by_domain.items()]),
        Series("Memories per category", [(k or "(none)", float(v)) for k, v in by_category.items()][:20]),
        Series("Top tags", [(k, float(v)) for k, v in tx.tag_counts(viewer, where, 15).items()]),
        Series("Memories per day", _per_day(created), "line"),
    ]
    result = render_charts("memhub statistics", panels, args.format)
    return replace(result, truncated=result.truncated or truncated)


async def visualize(call: Call, args: m.VisualizeInput) -> m.VisualizeOutput:
    def work(tx: Tx) -> Rendering:
        domains.check_filters(tx, call.principal, args.project_id, args.session_id)
        if args.type == "memory_map":
            return _memory_map(tx, call, args)
        if args.type == "domain_graph":
            return _domain_graph(tx, call, args)
        return _charts(tx, call, args)

    result = await call.read(work)
    return m.VisualizeOutput(
        type=args.type, format=args.format, content=result.content, nodes=result.nodes, edges=result.edges,
        truncated=result.truncated,
    )  # fmt: skip
