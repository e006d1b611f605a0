"""The `discussion` toolset (seed 004): 13 tools over projects, topic trees, logs and decisions."""

from __future__ import annotations

from memhub.mcp.toolkit import Toolset, ToolSpec, transactional
from memhub.services.discussion import errors
from memhub.services.discussion import models as m
from memhub.services.discussion import service as s

_IMMUTABLE = " Immutable."  # the toolset's instructions say it in full

TOOLS = (  # a tuple: each spec keeps its own ToolSpec[In, Out] type for the checker
    ToolSpec(
        "add-project",
        "Add a project (unique name); you become its owner." + _IMMUTABLE,
        m.AddProjectInput,
        m.AddProjectOutput,
        transactional(s.add_project),
        read_only=False,
        title="Add project",
    ),
    ToolSpec(
        "get-projects",
        "List the projects you are a member of, newest first.",
        m.GetProjectsInput,
        m.ProjectsOutput,
        transactional(s.get_projects),
        read_only=True,
        title="List projects",
    ),
    ToolSpec(
        "add-topic",
        "Add a topic to a project, optionally under a parent topic." + _IMMUTABLE,
        m.AddTopicInput,
        m.AddTopicOutput,
        transactional(s.add_topic),
        read_only=False,
        title="Add topic",
    ),
    ToolSpec(
        "add-log",
        "Append one exchange (an AI proposal and the user's answer) to a topic's log." + _IMMUTABLE,
        m.AddLogInput,
        m.AddLogOutput,
        transactional(s.add_log),
        read_only=False,
        title="Add log entry",
    ),
    ToolSpec(
        "add-decision",
        "Record a decision and its reason, closing a topic's discussion." + _IMMUTABLE,
        m.AddDecisionInput,
        m.AddDecisionOutput,
        transactional(s.add_decision),
        read_only=False,
        title="Add decision",
    ),
    ToolSpec(
        "get-topics",
        "Child topics of a parent topic (or top-level ones), oldest first.",
        m.TopicListInput,
        m.TopicsOutput,
        transactional(s.get_topics),
        read_only=True,
        title="List topics",
    ),
    ToolSpec(
        "get-decided-topics",
        "Like get-topics, only topics with a decision.",
        m.TopicListInput,
        m.TopicsOutput,
        transactional(s.get_decided_topics),
        read_only=True,
        title="List decided topics",
    ),
    ToolSpec(
        "get-undecided-topics",
        "Like get-topics, only topics without a decision.",
        m.TopicListInput,
        m.TopicsOutput,
        transactional(s.get_undecided_topics),
        read_only=True,
        title="List undecided topics",
    ),
    ToolSpec(
        "get-topic-tree",
        "A topic and its descendants, breadth first; if truncated, call again from a child topic.",
        m.TopicTreeInput,
        m.TopicTreeOutput,
        transactional(s.get_topic_tree),
        read_only=True,
        title="Get topic tree",
    ),
    ToolSpec(
        "get-logs",
        "A topic's discussion log, oldest first, from start_id on (next page: start_id=next_start_id).",
        m.PageInput,
        m.LogsOutput,
        transactional(s.get_logs),
        read_only=True,
        title="Get discussion log",
    ),
    ToolSpec(
        "get-decisions",
        "A topic's decisions, oldest first, from start_id on.",
        m.PageInput,
        m.DecisionsOutput,
        transactional(s.get_decisions),
        read_only=True,
        title="Get decisions",
    ),
    ToolSpec(
        "search-topics",
        "A project's topics whose title or description contains the keyword, newest first.",
        m.SearchInput,
        m.TopicsOutput,
        transactional(s.search_topics),
        read_only=True,
        title="Search topics",
    ),
    ToolSpec(
        "search-decisions",
        "A project's decisions whose decision or reason contains the keyword, newest first.",
        m.SearchInput,
        m.DecisionsOutput,
        transactional(s.search_decisions),
        read_only=True,
        title="Search decisions",
    ),
)

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
