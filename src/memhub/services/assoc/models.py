"""Seed 003's seven tools: inputs keep the seed's properties, enums and defaults; outputs are typed.

Each tool takes an `action` (or `type`) and the properties that action needs; which ones are
required per action is checked by the services (the seed's schemas cannot express it).
Optional additions (allowed as MINOR changes): `memory.related_memory_ids` and
`memory.metadata` (manual associations, free metadata), `project.force` (delete a non-empty
project), `memory_manage.dry_run`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from memhub.services.common import (
    JSON_MAX_DEPTH,
    JsonObject,
    SafeText,
    bounded_json,
    envelope_only,
    input_schema,
    json_text,
    open_output,
    optional_means_absent,
)

Domain = Literal["global", "user", "project", "session"]
DOMAINS: tuple[Domain, ...] = ("global", "user", "project", "session")

CONTENT_CHARS = 32_000
QUERY_CHARS = 2_000
SHORT = 200
MAX_LIMIT = 100
MAX_TAGS = 32
MAX_IDS = 1_000
IMPORT_CHARS = 16_000_000
IMPORT_DEPTH = 3 + JSON_MAX_DEPTH  # {"memories": [{"metadata": ...}]}

Tag = Annotated[SafeText, Field(min_length=1, max_length=64)]
# ids, names and dates: the length limit is enforced, not published (no real value gets near it)
Short = Annotated[SafeText, Field(max_length=SHORT), WithJsonSchema({"type": "string"})]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="Maximum results.")]
Threshold = Annotated[
    float,
    Field(
        ge=0,
        le=1,
        description="Minimum calibrated similarity, 0-1.",
    ),
]
Depth = Annotated[int, Field(ge=1, le=5, description="Association hops to follow.")]
ProjectRef = Annotated[Short, WithJsonSchema({"type": "string", "description": "Project ID (proj_…)."})]
SessionRef = Annotated[Short, WithJsonSchema({"type": "string", "description": "Session ID (sess_…)."})]


def _output_schema(schema: dict[str, Any]) -> None:
    optional_means_absent(schema)
    open_output(schema)


def _envelope(schema: dict[str, Any]) -> None:
    _output_schema(schema)
    envelope_only(schema)


class Input(BaseModel):
    """Unknown properties are errors and types are strict: `true` is not 1.0, `"5"` is not 5 (an
    integer is still a valid `number`; enums are their strings)."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=input_schema, defer_build=True)


class Output(BaseModel):
    """Results are dumped with `exclude_none`: an unset field is absent, never null."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_output_schema, defer_build=True)


# -- inputs -----------------------------------------------------------------------------------


def _check_import_records(document: Any) -> None:
    """Each imported memory's metadata obeys what `metadata` obeys in `memory(store)`."""
    records = document.get("memories") if isinstance(document, dict) else document
    if not isinstance(records, list):
        return
    for number, record in enumerate(records, 1):
        if isinstance(record, dict) and isinstance(record.get("metadata"), dict):
            try:
                bounded_json(record["metadata"])
            except ValueError as exc:
                raise ValueError(f"memory {number}: metadata {exc}") from None


class MemoryInput(Input):
    action: Literal["store", "search", "get", "get_related", "update", "delete"] = Field(
        description="store (content, domain), search (query), get, get_related (follow associations), "
        "update, delete (memory_id)."
    )
    memory_id: Short | None = Field(None, description="Memory ID (mem_…).")
    content: Annotated[SafeText, Field(max_length=CONTENT_CHARS)] | None = Field(
        None, description="Text to remember."
    )
    query: Annotated[SafeText, Field(max_length=QUERY_CHARS)] | None = Field(
        None, description="What to find, in Japanese or English."
    )
    domain: Domain | None = Field(
        None,
        description="global (everyone), user (only you), project (its members), session (this session).",
    )
    include_domains: list[Domain] | None = Field(None, description="search: where to look (default: all).")
    project_id: ProjectRef | None = Field(None, description="Project ID (proj_…) of the project domain.")
    session_id: SessionRef | None = Field(None, description="Session ID (sess_…); default: the current one.")
    tags: Annotated[list[Tag], Field(max_length=MAX_TAGS)] | None = Field(None, description="Tags to attach.")
    category: Short | None = Field(None, description="One category, e.g. 'decision'.")
    importance: float | None = Field(None, ge=0, le=1, description="Importance 0-1 (default 0.5).")
    limit: Limit = 10
    threshold: Threshold = 0.7
    depth: Depth = 2
    related_memory_ids: Annotated[list[Short], Field(max_length=50)] | None = Field(
        None, description="Memory IDs to associate with it."
    )
    metadata: JsonObject | None = Field(
        None, description=f"Free-form JSON object, at most {JSON_MAX_DEPTH} levels."
    )


class ManageInput(Input):
    action: Literal[
        "stats", "export", "import", "change_domain", "batch_delete", "cleanup", "list_categories"
    ] = Field(
        description="stats, export, import (import_data), change_domain (memory_ids, new_domain), "
        "batch_delete (memory_ids), cleanup (cleanup_before), list_categories."
    )
    memory_ids: Annotated[list[Short], Field(max_length=MAX_IDS)] | None = Field(
        None, description="Memory IDs (batch_delete, change_domain)."
    )
    new_domain: Domain | None = Field(None, description="Target domain (change_domain).")
    target_domain: Domain | None = Field(None, description="Domain to act on (stats, export, cleanup).")
    project_id: ProjectRef | None = None
    session_id: SessionRef | None = None
    export_format: Literal["json", "csv", "markdown"] = Field(
        "json", description="json is lossless and re-importable."
    )
    import_data: (
        Annotated[SafeText, Field(max_length=IMPORT_CHARS), json_text(IMPORT_DEPTH, _check_import_records)]
        | None
    ) = Field(None, description="A memhub JSON export (import).")
    cleanup_before: Short | None = Field(
        None, description="cleanup: delete session memories created before this ISO-8601 time."
    )
    dry_run: bool = Field(False, description="Only report what would change.")


class SearchFilters(Input):
    domains: list[Domain] | None = Field(None, description="Only these domains.")
    categories: Annotated[list[Short], Field(max_length=50)] | None = Field(
        None, description="Only these categories."
    )
    importance_min: float | None = Field(None, ge=0, le=1, description="Lowest importance.")
    importance_max: float | None = Field(None, ge=0, le=1, description="Highest importance.")
    project_ids: Annotated[list[Short], Field(max_length=50)] | None = Field(
        None, description="Only these projects (proj_…)."
    )


class SearchInput(Input):
    type: Literal["semantic", "tags", "timerange", "advanced", "similar"] = Field(
        description="semantic (query), tags, timerange (start_time, end_time), "
        "advanced (query, filters), similar (memory_id)."
    )
    query: Annotated[SafeText, Field(max_length=QUERY_CHARS)] | None = Field(
        None, description="What to find, in Japanese or English."
    )
    tags: Annotated[list[Tag], Field(max_length=MAX_TAGS)] | None = Field(
        None, description="Memories with any of these tags."
    )
    start_time: Short | None = Field(None, description="ISO-8601 date-time.")
    end_time: Short | None = Field(None, description="ISO-8601 date-time.")
    memory_id: Short | None = Field(None, description="similar: find this memory's neighbours.")
    filters: SearchFilters | None = Field(None, description="advanced: narrow the results.")
    limit: Limit = 10
    threshold: Threshold = 0.7


class ProjectInput(Input):
    action: Literal["create", "list", "get", "add_member", "remove_member", "update", "delete"] = Field(
        description="create (name), list, get, add_member (user_id, role), remove_member (user_id), "
        "update (name, description), delete; all but create and list need project_id."
    )
    project_id: ProjectRef | None = None
    name: Annotated[SafeText, Field(max_length=SHORT)] | None = Field(None, description="Unique name.")
    description: Annotated[SafeText, Field(max_length=16_000)] | None = Field(
        None, description="What it is about."
    )
    user_id: Short | None = Field(None, description="The member's user name.")
    role: Literal["editor", "viewer"] | None = Field(
        None, description="add_member: editor reads and writes, viewer only reads."
    )
    role_filter: Literal["editor", "viewer"] | None = Field(None, description="list: only this role.")
    force: bool = Field(False, description="delete: also delete its memories and discussions.")


class UserInput(Input):
    action: Literal[
        "get_current", "get_projects", "get_sessions", "create_session", "switch_session", "end_session"
    ] = Field(
        description="get_current (who you are), get_projects, get_sessions, create_session (session_name), "
        "switch_session, end_session (session_id)."
    )
    session_name: Short | None = Field(None, description="Name of the new session.")
    session_id: SessionRef | None = None
    include_stats: bool = Field(False, description="Add memory counts.")


class TimeRange(Input):
    start: Short | None = Field(None, description="ISO-8601 date-time.")
    end: Short | None = Field(None, description="ISO-8601 date-time.")


class VisualizeInput(Input):
    type: Literal["memory_map", "stats_dashboard", "domain_graph", "timeline", "category_chart"] = Field(
        description="memory_map (center_memory_id, depth), stats_dashboard, domain_graph, timeline "
        "(time_range), category_chart."
    )
    target_domain: Domain | None = Field(None, description="Only memories of this domain.")
    project_id: ProjectRef | None = None
    session_id: SessionRef | None = None
    center_memory_id: Short | None = Field(None, description="memory_map: the memory in the middle.")
    depth: Depth = 2
    format: Literal["html", "svg", "json", "graphviz"] = Field("html", description="graphviz is DOT.")
    time_range: TimeRange | None = Field(None, description="timeline: the period shown.")


class MigrationConfig(Input):
    source_domain: Domain = Field(description="Move memories from this domain...")
    target_domain: Domain = Field(description="...to this one.")
    filter_criteria: JsonObject | None = Field(
        None,
        description="Any of category, tags, project_id, owner, before, after; target_project_id.",
    )


class AdminInput(Input):
    action: Literal[
        "health_check", "system_stats", "backup", "restore", "reindex", "cleanup_orphans", "migrate_domain"
    ] = Field(
        description="health_check (anyone); admin role: system_stats, backup, restore (backup_path), "
        "reindex, cleanup_orphans, migrate_domain (migration_config)."
    )
    backup_path: Annotated[SafeText, Field(max_length=4096)] | None = Field(
        None, description="Backup file (default: a new one in the backups folder)."
    )
    include_data: list[Literal["memories", "projects", "sessions", "associations"]] | None = Field(
        None, description="backup: only these (default: everything)."
    )
    migration_config: MigrationConfig | None = Field(None, description="migrate_domain: what to move.")
    force: bool = Field(False, description="Apply restore or migrate_domain (else: only report).")


# -- outputs ----------------------------------------------------------------------------------


class Envelope(Output):
    """A tool's result: its published outputSchema is the envelope (see common.envelope_only)."""

    model_config = ConfigDict(json_schema_extra=_envelope)


def _any_object(schema: dict[str, Any]) -> None:
    schema.clear()
    schema["type"] = "object"


class ActionResult(Output):
    """The result of an action-style tool: which fields it has depends on the action.

    A schema could only list every field as optional, which tells a client nothing it can
    rely on, so the published outputSchema is just `{"type": "object"}`; the server still
    checks every result against the full model, and docs/assoc.md describes each action's.
    """

    model_config = ConfigDict(json_schema_extra=_any_object)


class Memory(Output):
    id: str
    content: str
    domain: Domain
    tags: list[str]
    category: str | None = None
    importance: float
    access_count: int
    metadata: dict[str, Any]
    user_id: str | None = None
    project_id: str | None = None
    session_id: str | None = None
    author_id: str
    created_at: str
    updated_at: str
    expires_at: str | None = None
    score: float | None = Field(None, description="Ranking score (search results).")
    similarity: float | None = Field(None, description="Calibrated similarity 0-1 (search results).")


class Association(Output):
    from_memory_id: str
    to_memory_id: str
    type: Literal["semantic", "temporal", "manual"]
    strength: float


class RelatedMemory(Output):
    memory: Memory
    depth: int
    strength: float = Field(description="Product of the strengths along the path.")
    via: str = Field(description="Association type of the last hop.")


class MemoryOutput(ActionResult):
    action: str
    memory: Memory | None = None
    memories: list[Memory] | None = None
    related: list[RelatedMemory] | None = None
    associations: list[Association] | None = None
    deleted: list[str] | None = None
    note: str | None = None


class ManageOutput(ActionResult):
    action: str
    stats: dict[str, Any] | None = None
    format: str | None = None
    data: str | None = None
    count: int | None = None
    memory_ids: list[str] | None = None
    categories: dict[str, int] | None = None
    dry_run: bool | None = None


class SearchOutput(Envelope):
    type: str
    memories: list[Memory]
    total: int
    note: str | None = None


class Member(Output):
    user_id: str
    role: str
    joined_at: str


class Project(Output):
    id: str
    name: str
    description: str | None = None
    owner: str
    role: str | None = None
    created_at: str
    updated_at: str
    members: list[Member] | None = None
    stats: dict[str, Any] | None = None


class ProjectOutput(ActionResult):
    action: str
    project: Project | None = None
    projects: list[Project] | None = None
    deleted: str | None = None
    removed: str | None = None


class Session(Output):
    id: str
    name: str | None = None
    status: str
    current: bool
    created_at: str
    ended_at: str | None = None


class UserOutput(ActionResult):
    action: str
    user_id: str | None = None
    role: str | None = None
    current_session: Session | None = None
    session: Session | None = None
    sessions: list[Session] | None = None
    projects: list[Project] | None = None
    stats: dict[str, Any] | None = None


class VisualizeOutput(Envelope):
    type: str
    format: str
    content: str
    nodes: int
    edges: int
    truncated: bool


class AdminOutput(ActionResult):
    action: str
    status: str
    details: dict[str, Any]
