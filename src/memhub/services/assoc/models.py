"""Seed 003's seven tools: inputs keep the seed's properties, enums and defaults; outputs are typed.

Each tool takes an `action` (or `type`) and the properties that action needs; which ones are
required per action is checked by the services (the seed's schemas cannot express it).
Optional additions (allowed as MINOR changes): `memory.related_memory_ids` and
`memory.metadata` (manual associations, free metadata), `project.force` (delete a non-empty
project), `memory_manage.dry_run`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memhub.services.common import JSON_MAX_DEPTH, JsonObject, SafeText, bounded_json, json_text

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
Short = Annotated[SafeText, Field(max_length=SHORT)]
Limit = Annotated[
    int, Field(ge=1, le=MAX_LIMIT, description=f"Maximum results (default 10, max {MAX_LIMIT}).")
]
Threshold = Annotated[
    float, Field(ge=0, le=1, description="Minimum similarity (0-1, calibrated; see docs/assoc.md).")
]
Depth = Annotated[int, Field(ge=1, le=5, description="How many association hops (default 2, max 5).")]


class Input(BaseModel):
    """Unknown properties are errors and types are strict: `true` is not 1.0, `"5"` is not 5 (an
    integer is still a valid `number`; enums are their strings)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Output(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    action: Literal["store", "search", "get", "get_related", "update", "delete"]
    memory_id: Short | None = Field(None, description="Memory ID (get, get_related, update, delete).")
    content: Annotated[SafeText, Field(max_length=CONTENT_CHARS)] | None = Field(
        None, description="Content to remember (store, update)."
    )
    query: Annotated[SafeText, Field(max_length=QUERY_CHARS)] | None = Field(
        None, description="Query (search)."
    )
    domain: Domain | None = Field(None, description="Memory domain (required for store).")
    include_domains: list[Domain] | None = Field(
        None, description="Domains to search (default: global, user, project, session)."
    )
    project_id: Short | None = Field(None, description="Project ID (proj_…), for the project domain.")
    session_id: Short | None = Field(None, description="Session ID (sess_…); default: your current session.")
    tags: Annotated[list[Tag], Field(max_length=MAX_TAGS)] | None = Field(None, description="Tags.")
    category: Short | None = Field(None, description="Category.")
    importance: float | None = Field(None, ge=0, le=1, description="Importance 0-1 (default 0.5).")
    limit: Limit = 10
    threshold: Threshold = 0.7
    depth: Depth = 2
    related_memory_ids: Annotated[list[Short], Field(max_length=50)] | None = Field(
        None, description="Manual associations to create (store, update)."
    )
    metadata: JsonObject | None = Field(
        None,
        description=f"Free-form metadata (store, update): a JSON object, at most {JSON_MAX_DEPTH} levels.",
    )


class ManageInput(Input):
    action: Literal[
        "stats", "export", "import", "change_domain", "batch_delete", "cleanup", "list_categories"
    ]
    memory_ids: Annotated[list[Short], Field(max_length=MAX_IDS)] | None = Field(
        None, description="Memory IDs (batch_delete, change_domain)."
    )
    new_domain: Domain | None = Field(None, description="Target domain (change_domain).")
    target_domain: Domain | None = Field(None, description="Domain to act on (stats, export, cleanup).")
    project_id: Short | None = None
    session_id: Short | None = None
    export_format: Literal["json", "csv", "markdown"] = "json"
    import_data: (
        Annotated[SafeText, Field(max_length=IMPORT_CHARS), json_text(IMPORT_DEPTH, _check_import_records)]
        | None
    ) = Field(None, description="A memhub JSON export (import).")
    cleanup_before: Short | None = Field(
        None, description="Delete session memories created before this ISO-8601 date-time (cleanup)."
    )
    dry_run: bool = Field(False, description="Report what would change without changing it.")


class SearchFilters(Input):
    domains: list[Domain] | None = None
    categories: Annotated[list[Short], Field(max_length=50)] | None = None
    importance_min: float | None = Field(None, ge=0, le=1)
    importance_max: float | None = Field(None, ge=0, le=1)
    project_ids: Annotated[list[Short], Field(max_length=50)] | None = None


class SearchInput(Input):
    type: Literal["semantic", "tags", "timerange", "advanced", "similar"]
    query: Annotated[SafeText, Field(max_length=QUERY_CHARS)] | None = None
    tags: Annotated[list[Tag], Field(max_length=MAX_TAGS)] | None = None
    start_time: Short | None = Field(None, description="ISO-8601 date-time (timerange).")
    end_time: Short | None = Field(None, description="ISO-8601 date-time (timerange).")
    memory_id: Short | None = Field(None, description="Memory to find neighbours of (similar).")
    filters: SearchFilters | None = None
    limit: Limit = 10
    threshold: Threshold = 0.7


class ProjectInput(Input):
    action: Literal["create", "list", "get", "add_member", "remove_member", "update", "delete"]
    project_id: Short | None = None
    name: Annotated[SafeText, Field(max_length=SHORT)] | None = None
    description: Annotated[SafeText, Field(max_length=16_000)] | None = None
    user_id: Short | None = None
    role: Literal["editor", "viewer"] | None = None
    role_filter: Literal["editor", "viewer"] | None = None
    force: bool = Field(False, description="Delete a project that still holds memories or discussions.")


class UserInput(Input):
    action: Literal[
        "get_current", "get_projects", "get_sessions", "create_session", "switch_session", "end_session"
    ]
    session_name: Short | None = None
    session_id: Short | None = None
    include_stats: bool = False


class TimeRange(Input):
    start: Short | None = None
    end: Short | None = None


class VisualizeInput(Input):
    type: Literal["memory_map", "stats_dashboard", "domain_graph", "timeline", "category_chart"]
    target_domain: Domain | None = None
    project_id: Short | None = None
    session_id: Short | None = None
    center_memory_id: Short | None = None
    depth: Depth = 2
    format: Literal["html", "svg", "json", "graphviz"] = "html"
    time_range: TimeRange | None = None


class MigrationConfig(Input):
    source_domain: Domain
    target_domain: Domain
    filter_criteria: JsonObject | None = None


class AdminInput(Input):
    action: Literal[
        "health_check", "system_stats", "backup", "restore", "reindex", "cleanup_orphans", "migrate_domain"
    ]
    backup_path: Annotated[SafeText, Field(max_length=4096)] | None = None
    include_data: list[Literal["memories", "projects", "sessions", "associations"]] | None = None
    migration_config: MigrationConfig | None = None
    force: bool = False


# -- outputs ----------------------------------------------------------------------------------


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


class MemoryOutput(Output):
    action: str
    memory: Memory | None = None
    memories: list[Memory] | None = None
    related: list[RelatedMemory] | None = None
    associations: list[Association] | None = None
    deleted: list[str] | None = None
    note: str | None = None


class ManageOutput(Output):
    action: str
    stats: dict[str, Any] | None = None
    format: str | None = None
    data: str | None = None
    count: int | None = None
    memory_ids: list[str] | None = None
    categories: dict[str, int] | None = None
    dry_run: bool | None = None


class SearchOutput(Output):
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


class ProjectOutput(Output):
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


class UserOutput(Output):
    action: str
    user_id: str | None = None
    role: str | None = None
    current_session: Session | None = None
    session: Session | None = None
    sessions: list[Session] | None = None
    projects: list[Project] | None = None
    stats: dict[str, Any] | None = None


class VisualizeOutput(Output):
    type: str
    format: str
    content: str = Field(description="The rendering: an HTML page, an SVG, JSON or Graphviz DOT.")
    nodes: int
    edges: int
    truncated: bool


class AdminOutput(Output):
    action: str
    status: str
    details: dict[str, Any]
