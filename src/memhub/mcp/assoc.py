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


TOOLS = (  # a tuple: each spec keeps its own ToolSpec[In, Out] type for the checker
    ToolSpec(
        "memory",
        "Durable memories, linked to similar and recent ones (associations).",
        m.MemoryInput,
        m.MemoryOutput,
        _memory,
        read_only=False,
        title="Memories",
        destructive=True,
        exclude_none=True,
    ),
    ToolSpec(
        "memory_manage",
        "Memories in bulk: statistics, export, import (all or nothing), domain changes, deletion.",
        m.ManageInput,
        m.ManageOutput,
        manage.manage,
        read_only=False,
        title="Manage memories",
        destructive=True,
        exclude_none=True,
        max_payload=64 * 1024 * 1024,  # an import carries up to 16M characters
        timeout_s=600.0,
    ),
    ToolSpec(
        "search",
        "Search the memories you may see: by meaning, tags, time, filters or similarity.",
        m.SearchInput,
        m.SearchOutput,
        search.search,
        read_only=True,
        title="Search memories",
        exclude_none=True,
    ),
    ToolSpec(
        "project",
        "Projects and their members; the same projects the discussion tools use.",
        m.ProjectInput,
        m.ProjectOutput,
        people.project,
        read_only=False,
        title="Projects",
        destructive=True,
        exclude_none=True,
    ),
    ToolSpec(
        "user",
        "Who you are, your projects, and your sessions (session memories belong to one).",
        m.UserInput,
        m.UserOutput,
        people.user,
        read_only=False,
        title="User and sessions",
        exclude_none=True,
    ),
    ToolSpec(
        "visualize",
        "Render memories and their associations as HTML, SVG, JSON or Graphviz.",
        m.VisualizeInput,
        m.VisualizeOutput,
        visualize.visualize,
        read_only=True,
        title="Visualize memories",
        exclude_none=True,
    ),
    ToolSpec(
        "admin",
        "Health check and administration: statistics, backup, restore, reindex, migration.",
        m.AdminInput,
        m.AdminOutput,
        admin.admin,
        read_only=False,
        title="Administration",
        destructive=True,
        exclude_none=True,
        timeout_s=3600.0,  # a reindex of a large store embeds every item again
        rate_class="admin",
    ),
)

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
