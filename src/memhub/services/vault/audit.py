"""artifact_audit: is an artifact (a summary, a design note) rooted in its source note?

Definitions (seed 001 leaves them open; DESIGN §7 gives the starting point):
- node: a heading or a list item of the artifact (outside front matter and fenced code).
  Paragraph text under a heading belongs to that heading; continuation lines to their item.
  Nodes form a tree: headings by level, list items by indentation under the nearest heading.
- rooted: a node is rooted when it cites source lines that exist (`L12`, `L12-L30`,
  `lines 12-30`, `12-30行目`), or links to a heading/block of the source that exists
  (`[[source#Heading]]`), or is grounded in the source: at least GROUNDING_MIN_RATIO of its
  loose terms (see notes.py) occur in the source text. A node without any term (`---`) has
  nothing to ground and counts as rooted. A heading without text of its own is structure:
  neither rooted nor rootless by itself.
- rootless_node (根拠なし要素): a node with text that is not rooted.
- orphan_branch (孤立分岐): a node with children whose whole subtree (itself included) holds no
  rooted node; only the outermost such branch is counted.
- one_way_ref (片方向参照): a link of the artifact whose target does not exist, whose heading or
  block does not exist, or, for a link to another note (not the source, not the artifact
  itself, not an attachment), whose target does not link back to the artifact.
- cited_ranges, when not given: the artifact's front matter `source_lines` (`12-30, 40-52`,
  `[[12, 30], [40, 52]]` or a YAML list) plus every line citation in its text.
- marginal_gain: the share of the source's substantive lines (not blank, not front matter,
  not markup only) that no cited range covers: what one more full pass could still add.
needs_forced_full_scan is true when coverage_ratio < COVERAGE_MIN_RATIO (no citations at
all counts as 0), when any of the three counts is 1 or more, or when marginal_gain >=
MARGINAL_GAIN_MIN and some range is uncovered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memhub.core.errors import MemhubError, invalid
from memhub.services.runtime import Call
from memhub.services.vault import config as c
from memhub.services.vault import models as m
from memhub.services.vault.files import read_text
from memhub.services.vault.links import Link, Names, has_anchor, links
from memhub.services.vault.notes import front_matter_end, loose_fold, loose_query, split_lines
from memhub.services.vault.paths import is_text_name
from memhub.services.vault.ranges import Span, complement, merge, size
from memhub.services.vault.reading import scan_action
from memhub.services.vault.service import run
from memhub.services.vault.state import VaultState

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d+[.)])[ \t]+(?:\[[ xX]\][ \t]+)?(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CITE = re.compile(
    r"\bL(\d+)(?:\s*[-–~]\s*L?(\d+))?\b"
    r"|\blines?\s+(\d+)(?:\s*[-–~]\s*(\d+))?"
    r"|(\d+)(?:\s*[-–~]\s*(\d+))?\s*行目",
    re.IGNORECASE,
)
_NUMBERS = re.compile(r"(\d+)(?:\s*[-–~,]\s*(\d+))?")
_MARKUP_ONLY = re.compile(r"^[\s#>*_\-=`|:~]*$")
MAX_LINKED_NOTES = 200


@dataclass
class Node:
    id: str
    line: int
    heading: bool
    level: int  # heading level, or 10 + indentation for list items
    text: str
    parent: int | None
    children: list[int] = field(default_factory=list)
    rooted: bool = False
    counted: bool = True  # False: a heading without text of its own (structure)


def citations(text: str) -> list[Span]:
    spans = []
    for match in _CITE.finditer(text):
        groups = [g for g in match.groups() if g is not None]
        start = int(groups[0])
        end = int(groups[1]) if len(groups) > 1 else start
        spans.append((min(start, end), max(start, end)))
    return spans


def front_matter_ranges(lines: list[str]) -> list[Span]:
    """`source_lines` of the front matter: inline value plus any indented lines below it."""
    end = front_matter_end(lines)
    spans: list[Span] = []
    collecting = False
    for line in lines[1 : max(0, end - 1)]:
        if line.startswith("source_lines:"):
            collecting = True
            value = line.partition(":")[2]
        elif collecting and line[:1] in (" ", "\t", "-"):
            value = line
        else:
            collecting = False
            continue
        for match in _NUMBERS.finditer(value):
            start = int(match.group(1))
            stop = int(match.group(2)) if match.group(2) else start
            spans.append((min(start, stop), max(start, stop)))
    return spans


def parse_nodes(lines: list[str]) -> list[Node]:
    nodes: list[Node] = []
    headings: list[int] = []
    items: list[tuple[int, int]] = []  # (indent, node index)
    fenced = False
    for index in range(front_matter_end(lines), len(lines)):
        line, number = lines[index], index + 1
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip():
            continue
        if match := _HEADING.match(line):
            level = len(match.group(1))
            while headings and nodes[headings[-1]].level >= level:
                headings.pop()
            parent = headings[-1] if headings else None
            nodes.append(Node(f"L{number}", number, True, level, match.group(2), parent, counted=False))
            headings.append(len(nodes) - 1)
            items = []
        elif match := _ITEM.match(line):
            indent = len(match.group(1).expandtabs(4))
            while items and items[-1][0] >= indent:
                items.pop()
            parent = items[-1][1] if items else (headings[-1] if headings else None)
            nodes.append(Node(f"L{number}", number, False, 10 + indent, match.group(2), parent))
            items.append((indent, len(nodes) - 1))
        elif items and line[:1] in (" ", "\t"):
            nodes[items[-1][1]].text += "\n" + line.strip()
        elif headings:
            owner = nodes[headings[-1]]
            owner.text += "\n" + line.strip()
            owner.counted = True
            items = []
    for i, node in enumerate(nodes):
        if node.parent is not None:
            nodes[node.parent].children.append(i)
    return nodes


@dataclass
class Audit:
    findings: list[m.Finding] = field(default_factory=list)
    rootless: int = 0
    orphans: int = 0
    one_way: int = 0


def _excerpt(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= 60 else first[:57] + "..."


def _root(nodes: list[Node], source_rel: str, source_lines: list[str], total: int, audit: Audit) -> None:
    source_loose = loose_fold("\n".join(source_lines))
    for node in nodes:
        cites = citations(node.text)
        in_range = [s for s in cites if s[0] >= 1 and s[1] <= total]
        anchored = any(
            link.anchor and link.target and _same(link.target, source_rel) and has_anchor(source_lines, link)
            for link in links([node.text])
        )
        terms = loose_query(node.text).terms
        grounded = not terms or (
            len(loose_query(node.text).keys_found(source_loose)) / len(terms) >= c.GROUNDING_MIN_RATIO
        )
        node.rooted = bool(in_range) or anchored or (grounded and not cites)
        if node.counted and not node.rooted:
            audit.rootless += 1
            why = (
                "cites lines outside the source" if cites else "cites no source lines and is not grounded in"
            )
            audit.findings.append(
                m.Finding(
                    kind="rootless_node",
                    node_id=node.id,
                    message=f"{node.id} '{_excerpt(node.text)}' {why} {source_rel}",
                )
            )


def _same(target: str, rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return target in (rel, rel.removesuffix(".md"), name, name.removesuffix(".md"))


def _orphans(nodes: list[Node], audit: Audit) -> None:
    def any_rooted(i: int) -> bool:
        node = nodes[i]
        return (node.rooted and node.counted) or any(any_rooted(ch) for ch in node.children)

    def visit(i: int) -> None:
        node = nodes[i]
        if node.children and not any_rooted(i):
            audit.orphans += 1
            audit.findings.append(
                m.Finding(
                    kind="orphan_branch",
                    node_id=node.id,
                    message=f"{node.id} '{_excerpt(node.text)}': nothing in this branch is rooted",
                )
            )
            return
        for child in node.children:
            visit(child)

    for i, node in enumerate(nodes):
        if node.parent is None:
            visit(i)


def _refs(
    state: VaultState, artifact: str, lines: list[str], source: str, nodes: list[Node], audit: Audit
) -> None:
    names = Names.of_vault(state.vault)
    checked: dict[str, bool] = {}
    seen: set[tuple[str, str | None]] = set()
    for link in links(lines):
        key = (link.target, link.anchor)
        if key in seen:
            continue
        seen.add(key)
        node_id = _node_at(nodes, link.line)
        problem = _problem(state, names, artifact, source, link, checked)
        if problem:
            audit.one_way += 1
            audit.findings.append(
                m.Finding(kind="one_way_ref", node_id=node_id, message=f"L{link.line} {problem}")
            )


def _node_at(nodes: list[Node], line: int) -> str | None:
    best = None
    for node in nodes:
        if node.line <= line:
            best = node.id
    return best


def _problem(
    state: VaultState, names: Names, artifact: str, source: str, link: Link, checked: dict[str, bool]
) -> str | None:
    label = link.target or "#" + (link.anchor or "")
    target = names.resolve(link, artifact)
    if target is None:
        return f"links to {label}, which does not exist"
    if not is_text_name(target.rsplit("/", 1)[-1]):
        return None  # an attachment: existing is all it can do
    try:
        target_lines = split_lines(read_text(state.vault.root / target)[0])
    except (OSError, MemhubError):
        return f"links to {label}, which cannot be read"
    if not has_anchor(target_lines, link):
        return f"links to {label}#{link.anchor}, which has no such heading or block"
    if target in (artifact, source):
        return None
    if target not in checked:
        if len(checked) >= MAX_LINKED_NOTES:
            return None
        checked[target] = any(names.resolve(back, target) == artifact for back in links(target_lines))
    return None if checked[target] else f"links to {target}, which does not link back"


async def artifact_audit(call: Call, args: m.AuditInput) -> m.AuditOutput:
    def work(state: VaultState) -> m.AuditOutput:
        for r in args.cited_ranges or ():
            if r.end_line < r.start_line:
                raise invalid("cited_ranges: end_line must not be before start_line")
        artifact = state.vault.existing_file(args.artifact_path)
        source = state.vault.existing_file(args.source_path)
        art_lines = split_lines(read_text(artifact.path)[0])
        src_text, snap = read_text(source.path)
        src_lines = split_lines(src_text)
        total = len(src_lines)
        nodes = parse_nodes(art_lines)
        audit = Audit()
        _root(nodes, source.rel, src_lines, total, audit)
        _orphans(nodes, audit)
        _refs(state, artifact.rel, art_lines, source.rel, nodes, audit)
        if args.cited_ranges is not None:
            cited: list[Span] = [(r.start_line, r.end_line) for r in args.cited_ranges]
        else:
            cited = front_matter_ranges(art_lines) + [s for n in nodes for s in citations(n.text)]
        covered = merge(cited, total)
        uncovered = complement(covered, total)
        ratio: float | None
        gain: float | None
        if not cited and total:
            ratio, gain = None, None
        else:
            ratio = 1.0 if total == 0 else round(size(covered) / total, 4)
            gain = _marginal_gain(src_lines, uncovered)
        low = ratio is None or (size(covered) / total if total else 1.0) < c.COVERAGE_MIN_RATIO
        structural = audit.rootless + audit.orphans + audit.one_way > 0
        gaining = gain is not None and gain >= c.MARGINAL_GAIN_MIN and bool(uncovered)
        forced = low or structural or gaining
        actions: list[m.NextAction] = []
        if low or gaining:
            actions.append(scan_action(source.rel, uncovered, 0.8))
        if structural:
            params = {"artifact_path": artifact.rel, "source_path": source.rel}
            actions.append(m.NextAction(type="artifact_audit", confidence=0.6, params=params))
        if not forced:
            actions.append(m.NextAction(type="stop", confidence=ratio, params=None))
        state.saw(source.rel, snap.sha256)
        call.detail.update(
            artifact_path=artifact.rel, source_path=source.rel, rootless_nodes=audit.rootless,
            orphan_branches=audit.orphans, one_way_refs=audit.one_way,
        )  # fmt: skip
        return m.AuditOutput(
            artifact_path=artifact.rel,
            source_path=source.rel,
            rootless_nodes=audit.rootless,
            orphan_branches=audit.orphans,
            one_way_refs=audit.one_way,
            coverage_ratio=ratio,
            uncovered_ranges_count=len(uncovered),
            marginal_gain=gain,
            needs_forced_full_scan=forced,
            next_actions=actions,
            findings=audit.findings,
        )

    return await run(call, work)


def _marginal_gain(lines: list[str], uncovered: list[Span]) -> float:
    fm = front_matter_end(lines)
    substantive = {i + 1 for i in range(fm, len(lines)) if not _MARKUP_ONLY.match(lines[i])}
    if not substantive:
        return 0.0
    missing = sum(1 for s, e in uncovered for n in range(s, e + 1) if n in substantive)
    return round(missing / len(substantive), 4)
