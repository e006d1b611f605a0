"""The `discussion` toolset (seed 004): 13 tools over projects, topic trees, logs and decisions."""

from __future__ import annotations

from memhub.mcp.toolkit import Toolset, ToolSpec, transactional
from memhub.services.discussion import errors
from memhub.services.discussion import models as m
from memhub.services.discussion import service as s

_IMMUTABLE = " Records are immutable: nothing is ever updated or deleted."

TOOLS = [
    ToolSpec(
        "add-project",
        "Add a project (name must be unique). You become its owner." + _IMMUTABLE,
        m.AddProjectInput,
        m.AddProjectOutput,
        transactional(s.add_project),
        read_only=False,
    ),
    ToolSpec(
        "get-projects",
        "List the projects you are a member of, newest first (limit default 30, max 30).",
        m.GetProjectsInput,
        m.ProjectsOutput,
        transactional(s.get_projects),
        read_only=True,
    ),
    ToolSpec(
        "add-topic",
        "Add a discussion topic to a project, optionally under a parent topic." + _IMMUTABLE,
        m.AddTopicInput,
        m.AddTopicOutput,
        transactional(s.add_topic),
        read_only=False,
    ),
    ToolSpec(
        "add-log",
        "Append one exchange (one AI proposal and the user's answer) to a topic's discussion log."
        + _IMMUTABLE,
        m.AddLogInput,
        m.AddLogOutput,
        transactional(s.add_log),
        read_only=False,
    ),
    ToolSpec(
        "add-decision",
        "Record a decision and its reason, closing the topic's discussion (without topic_id it is "
        "filed under the current project)." + _IMMUTABLE,
        m.AddDecisionInput,
        m.AddDecisionOutput,
        transactional(s.add_decision),
        read_only=False,
    ),
    ToolSpec(
        "get-topics",
        "List the direct child topics of a parent topic (omit parent_topic_id for top-level topics), "
        "oldest first (limit default 10, max 10).",
        m.TopicListInput,
        m.TopicsOutput,
        transactional(s.get_topics),
        read_only=True,
    ),
    ToolSpec(
        "get-decided-topics",
        "Like get-topics, but only topics that have at least one decision.",
        m.TopicListInput,
        m.TopicsOutput,
        transactional(s.get_decided_topics),
        read_only=True,
    ),
    ToolSpec(
        "get-undecided-topics",
        "Like get-topics, but only topics that have no decision yet.",
        m.TopicListInput,
        m.TopicsOutput,
        transactional(s.get_undecided_topics),
        read_only=True,
    ),
    ToolSpec(
        "get-topic-tree",
        "Get a topic and all its descendants as a tree, breadth first (limit default 100, max 100). "
        "When truncated is true, call again from a child topic to get the rest.",
        m.TopicTreeInput,
        m.TopicTreeOutput,
        transactional(s.get_topic_tree),
        read_only=True,
    ),
    ToolSpec(
        "get-logs",
        "Get a topic's discussion log in chronological order (oldest first), from start_id on "
        "(limit default 30, max 30). Pass next_start_id as start_id to read the next page.",
        m.PageInput,
        m.LogsOutput,
        transactional(s.get_logs),
        read_only=True,
    ),
    ToolSpec(
        "get-decisions",
        "Get the decisions of a topic, oldest first, from start_id on (limit default 30, max 30).",
        m.PageInput,
        m.DecisionsOutput,
        transactional(s.get_decisions),
        read_only=True,
    ),
    ToolSpec(
        "search-topics",
        "Find a project's topics whose title or description contains the keyword (case-insensitive "
        "substring, Japanese or English; several words must all occur). Newest first.",
        m.SearchInput,
        m.TopicsOutput,
        transactional(s.search_topics),
        read_only=True,
    ),
    ToolSpec(
        "search-decisions",
        "Find a project's decisions whose decision or reason contains the keyword (case-insensitive "
        "substring, Japanese or English; several words must all occur). Newest first.",
        m.SearchInput,
        m.DecisionsOutput,
        transactional(s.search_decisions),
        read_only=True,
    ),
]

TOOLSET = Toolset(
    "discussion",
    errors.render,
    TOOLS,
    instructions=(
        "Keep projects, topic trees, the log of each exchange (one AI proposal and the user's answer) "
        "and the decisions that closed them. Search topics and decisions before asking the user "
        "something that may already be decided. Records are never edited or deleted."
    ),
)
