"""Seed 001's tool inputs and outputs, field for field (names, types, defaults, limits).

Optional properties memhub adds (allowed by DESIGN §1) are marked "memhub:" in their
description; nothing of the seed is renamed or removed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from memhub.services.common import Envelope, Output, RequiredText, SafeText, StrictInput
from memhub.services.vault import config as c

# Bounds are enforced; the published schema keeps what a caller needs (tools/list is read every turn).
PATH_FIELD = Field(max_length=4 * c.MAX_PATH_CHARS, description="Vault-relative path, e.g. notes/a.md.")
PATH_SCHEMA = WithJsonSchema({"type": "string", "description": "Vault-relative path, e.g. notes/a.md."})
Line = Annotated[int, Field(ge=1, le=10_000_000), WithJsonSchema({"type": "integer", "minimum": 1})]
Content = Annotated[SafeText, Field(max_length=c.MAX_CONTENT_CHARS, description="The note text (UTF-8).")]
MaxChars = Annotated[int, Field(ge=1, le=10_000_000)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]


# -- shared shapes ----------------------------------------------------------------------------


class LineRange(StrictInput):
    start_line: Annotated[Line, Field(description="First line, 1-based.")]
    end_line: Annotated[Line, Field(description="Last line, inclusive.")]


class OptionalRange(StrictInput):
    start_line: Annotated[Line | None, Field(description="First line, 1-based.")] = None
    end_line: Annotated[Line | None, Field(description="Last line, inclusive.")] = None


class Limits(StrictInput):
    max_chars: Annotated[
        MaxChars | None,
        Field(description=f"Characters returned at most (default {c.READ_DEFAULT_MAX_CHARS}).")
    ] = None  # fmt: skip


class Cursor(StrictInput):
    start_line: Annotated[Line | None, Field(description="Line to start at (default 1).")] = None


class Range(Output):
    start_line: int
    end_line: int


class NextLine(Output):
    start_line: int | None


class NextAction(Output):
    type: str
    confidence: float | None = None
    params: dict[str, Any] | None = None


# -- vault_ls ---------------------------------------------------------------------------------


class LsInput(StrictInput):
    relative_dir: Annotated[
        str | None, Field(max_length=4 * c.MAX_PATH_CHARS, description="Folder to list (default: the root).")
    ] = None


class Entry(Output):
    path: str
    type: Literal["file", "dir"]
    size_bytes: int | None


class LsOutput(Envelope):
    entries: list[Entry]


# -- vault_read -------------------------------------------------------------------------------


class ReadInput(StrictInput):
    path: Annotated[str, PATH_FIELD, PATH_SCHEMA]
    full: Annotated[
        bool | None, Field(description="Read the whole file (default false: `range` is then required).")
    ] = None
    range: Annotated[
        OptionalRange | None,
        Field(description="Lines to read, 1-based and inclusive (end_line default: the last line)."),
    ] = None
    limits: Annotated[Limits | None, Field(description="Output limits.")] = None


class ReadOutput(Envelope):
    text: str
    truncated: bool
    returned_chars: int
    applied_range: Range
    next_offset: NextLine
    truncated_reason: Literal["max_chars", "range_end", "hard_limit", "none"]


# -- vault_scan -------------------------------------------------------------------------------


class ScanInput(StrictInput):
    path: Annotated[str, PATH_FIELD, PATH_SCHEMA]
    cursor: Annotated[Cursor | None, Field(description="Where to start (start_line default 1).")] = None
    chunk_lines: Annotated[
        int | None,
        Field(
            ge=1,
            le=c.VAULT_SCAN_MAX_CHUNK_LINES,
            description=f"Lines per chunk, 1..{c.VAULT_SCAN_MAX_CHUNK_LINES} "
            f"(default {c.VAULT_SCAN_DEFAULT_CHUNK_LINES}).",
        ),
    ] = None
    limits: Annotated[Limits | None, Field(description="Output limits.")] = None


class ScanOutput(Envelope):
    text: str
    applied_range: Range
    next_cursor: NextLine
    eof: bool
    truncated: bool
    truncated_reason: Literal["max_chars", "chunk_end", "hard_limit", "none"]
    next_actions: list[NextAction]


# -- vault_coverage / artifact_audit ----------------------------------------------------------


class CoverageInput(StrictInput):
    path: Annotated[str, PATH_FIELD, PATH_SCHEMA]
    cited_ranges: Annotated[list[LineRange], Field(max_length=10_000, description="Line ranges cited.")]


class CoverageOutput(Envelope):
    path: str
    total_lines: int
    covered_lines: int
    coverage_ratio: float
    covered_ranges: list[Range]
    uncovered_ranges: list[Range]
    meets_min_coverage: bool
    next_actions: list[NextAction]


class AuditInput(StrictInput):
    artifact_path: Annotated[str, PATH_FIELD, PATH_SCHEMA]
    source_path: Annotated[str, PATH_FIELD, PATH_SCHEMA]
    cited_ranges: Annotated[
        list[LineRange] | None,
        Field(max_length=10_000, description="Source lines the artifact cites (default: read from the "
              "artifact's `source_lines` front matter and its L12-L30 citations)."),
    ] = None  # fmt: skip


class Finding(Output):
    kind: Literal["rootless_node", "orphan_branch", "one_way_ref"]
    message: str
    node_id: str | None


class AuditOutput(Envelope):
    artifact_path: str
    source_path: str
    rootless_nodes: int
    orphan_branches: int
    one_way_refs: int
    coverage_ratio: float | None
    uncovered_ranges_count: int
    marginal_gain: float | None
    needs_forced_full_scan: bool
    next_actions: list[NextAction]
    findings: list[Finding]


# -- vault_find -------------------------------------------------------------------------------


class FindScope(StrictInput):
    relative_dir: Annotated[
        str | None, Field(max_length=4 * c.MAX_PATH_CHARS, description="Only this folder.")
    ] = None
    glob: Annotated[str | None, Field(max_length=500, description="e.g. projects/**/*.md")] = None


class Budget(StrictInput):
    max_candidates: Annotated[
        int | None,
        Field(ge=1, le=c.FIND_MAX_CANDIDATES, description=f"default {c.FIND_DEFAULT_MAX_CANDIDATES}"),
    ] = None
    time_ms: Annotated[
        int | None, Field(ge=1, le=c.FIND_MAX_TIME_MS, description=f"default {c.FIND_DEFAULT_TIME_MS}")
    ] = None


class FindInput(StrictInput):
    query: Annotated[RequiredText, Field(max_length=2_000, description="What to find.")]
    scope: Annotated[FindScope | None, Field(description="Where to look.")] = None
    budget: Annotated[Budget | None, Field(description="Limits of the search.")] = None


class SignalCoverage(Output):
    normalized: float
    loose: float


class FindSummary(Output):
    scanned_files: int
    scanned_nodes: int
    candidates: int
    warnings: int
    max_stage_applied: int
    scope_expanded: bool
    integrated_candidates: int
    signal_coverage: SignalCoverage
    file_bias_ratio: float
    gap_ranges_count: int
    sufficiency_score: float
    integration_status: Literal["ready", "needs_followup", "blocked"]
    cutoff_reason: Annotated[
        Literal["time_budget", "candidate_cap", "stage_cap", "hard_limit"] | None,
        Field(exclude_if=lambda value: value is None, description="Only present when the walk was cut off."),
    ] = None


class FindOutput(Envelope):
    trace_id: str
    summary: FindSummary
    next_actions: list[NextAction]


# -- writes -----------------------------------------------------------------------------------


class CreateInput(StrictInput):
    path: Annotated[str, PATH_FIELD, PATH_SCHEMA]
    content: Content


class WriteInput(StrictInput):
    path: Annotated[str, PATH_FIELD, PATH_SCHEMA]
    content: Content
    mode: Annotated[Literal["overwrite", "append"], Field(description="overwrite or append.")]


class WrittenOutput(Envelope):
    written_path: str
    written_bytes: int


class ReplaceInput(StrictInput):
    path: Annotated[str, PATH_FIELD, PATH_SCHEMA]
    find: Annotated[RequiredText, Field(max_length=c.MAX_CONTENT_CHARS, description="Literal text to find.")]
    replace: Annotated[SafeText, Field(max_length=c.MAX_CONTENT_CHARS, description="Its replacement.")]
    max_replacements: Annotated[
        int | None, Field(ge=1, le=100_000, description="Occurrences replaced at most (default 1).")
    ] = None


class ReplaceOutput(Envelope):
    written_path: str
    replacements: int


# -- vault_search -----------------------------------------------------------------------------


class SearchInput(StrictInput):
    query: Annotated[RequiredText, Field(max_length=2_000, description="Pattern or text to find.")]
    mode: Annotated[
        Literal["plain", "regex", "loose"] | None,
        Field(description="regex (default), plain or loose."),
    ] = None
    glob: Annotated[str | None, Field(max_length=500, description="e.g. projects/**/*.md")] = None
    relative_dir: Annotated[
        str | None, Field(max_length=4 * c.MAX_PATH_CHARS, description="Only this folder.")
    ] = None
    limit: Annotated[
        int | None,
        Field(ge=1, le=c.SEARCH_MAX_LIMIT, description=f"default {c.SEARCH_DEFAULT_LIMIT}"),
    ] = None


class SearchHit(Output):
    path: str
    snippet: str
    line: Annotated[int, Field(description="memhub: 1-based line of the match.")]


class SearchOutput(Envelope):
    results: list[SearchHit]
    mode: Annotated[Literal["plain", "regex", "loose"], Field(description="memhub: the mode applied.")]
    warnings: Annotated[list[str], Field(description="memhub: regex fallback or time-out notes.")]
    truncated: Annotated[bool, Field(description="memhub: more matches than `limit`, or time ran out.")]
