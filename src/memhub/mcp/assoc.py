"""The `assoc` toolset (seed 003): memory, memory_manage, search, project, user, visualize, admin."""

from __future__ import annotations

from memhub.mcp.toolkit import Toolset, ToolSpec
from memhub.services.assoc import admin, errors, manage, memories, people, search, visualize
from memhub.services.assoc import models as m
from memhub.services.runtime import Call

MEMORY_ACTIONS = {
    "store": memories.store,
    "search": search.memory_search,
    "get": memories.get,
    "get_related": memories.get_related,
    "update": memories.update,
    "delete": memories.delete,
}


async def _memory(call: Call, args: m.MemoryInput) -> m.MemoryOutput:
    return await MEMORY_ACTIONS[args.action](call, args)


TOOLS = [
    ToolSpec(
        "memory",
        "Store, search, get, get_related, update or delete memories. Domains: global (everyone), user "
        "(only you), project (its members; needs project_id), session (your current session). Storing "
        "links the memory to similar and recent ones (associations); get_related walks them.",
        m.MemoryInput,
        m.MemoryOutput,
        _memory,
        read_only=False,
        destructive=True,
        exclude_none=True,
    ),
    ToolSpec(
        "memory_manage",
        "Memory statistics, export (json lossless / csv / markdown), import (all or nothing), "
        "change_domain, batch_delete, cleanup of session memories before a date, list_categories.",
        m.ManageInput,
        m.ManageOutput,
        manage.manage,
        read_only=False,
        destructive=True,
        exclude_none=True,
        max_payload=64 * 1024 * 1024,  # an import carries up to 16M characters
        timeout_s=600.0,
    ),
    ToolSpec(
        "search",
        "Search memories: semantic (meaning, Japanese and English), tags, timerange, advanced (filters: "
        "domains, categories, importance range, project_ids), similar (neighbours of memory_id).",
        m.SearchInput,
        m.SearchOutput,
        search.search,
        read_only=True,
        exclude_none=True,
    ),
    ToolSpec(
        "project",
        "Create, list, get, update or delete projects and manage members (editor: read/write, viewer: "
        "read only). These are the same projects the discussion tools use.",
        m.ProjectInput,
        m.ProjectOutput,
        people.project,
        read_only=False,
        destructive=True,
        exclude_none=True,
    ),
    ToolSpec(
        "user",
        "Who you are and your projects; create, switch and end sessions (session memories belong to one).",
        m.UserInput,
        m.UserOutput,
        people.user,
        read_only=False,
        exclude_none=True,
    ),
    ToolSpec(
        "visualize",
        "Render memories: memory_map (associations around center_memory_id), stats_dashboard, "
        "domain_graph, timeline, category_chart; as html, svg, json or graphviz (DOT).",
        m.VisualizeInput,
        m.VisualizeOutput,
        visualize.visualize,
        read_only=True,
        exclude_none=True,
    ),
    ToolSpec(
        "admin",
        "Administration (admin role): health_check, system_stats, backup, restore (force to apply), "
        "reindex, cleanup_orphans, migrate_domain (force to apply).",
        m.AdminInput,
        m.AdminOutput,
        admin.admin,
        read_only=False,
        destructive=True,
        exclude_none=True,
        timeout_s=3600.0,  # a reindex of a large store embeds every item again
    ),
]

TOOLSET = Toolset(
    "assoc",
    errors.render,
    TOOLS,
    instructions=(
        "Store memories in a domain (global, user, project, session) and find them by meaning in "
        "Japanese or English; stored memories are linked to similar and recent ones (get_related "
        "walks the links). Projects and sessions here are shared with the other toolsets."
    ),
    # Semantic links are made for every memory this process embeds, whichever toolsets it serves
    # (a discussion-only server sharing the store must not leave memories unlinked).
    on_embedded=memories.link_semantic,
)
