"""Seed 004's tool inputs and outputs, field for field (names, types, defaults, maxima)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from memhub.services.common import Envelope, ItemId, Output, RequiredText, SafeText, StrictInput

MAX_PROJECTS = 30
MAX_TOPICS = 10
MAX_TREE = 100
MAX_PAGE = 30

NAME_CHARS = 200
TITLE_CHARS = 500
TEXT_CHARS = 16_000  # description, decision, reason
CONTENT_CHARS = 64_000  # one log entry
KEYWORD_CHARS = 500
URL_CHARS = 2_000


def _limit(default: int, maximum: int) -> object:
    return Field(default, ge=1, le=maximum, description="Maximum results.")


# -- inputs ---------------------------------------------------------------------------------


class AddProjectInput(StrictInput):
    name: Annotated[RequiredText, Field(max_length=NAME_CHARS, description="Project name (unique).")]
    description: Annotated[SafeText | None, Field(max_length=TEXT_CHARS, description="What it is about.")] = (
        None
    )
    asana_url: Annotated[
        SafeText | None,
        Field(max_length=URL_CHARS, pattern=r"^https?://\S+$", description="URL of the Asana project."),
    ] = None


class GetProjectsInput(StrictInput):
    limit: Annotated[int, _limit(MAX_PROJECTS, MAX_PROJECTS)] = MAX_PROJECTS


class AddTopicInput(StrictInput):
    project_id: Annotated[ItemId, Field(description="Project ID.")]
    title: Annotated[RequiredText, Field(max_length=TITLE_CHARS, description="Topic title.")]
    description: Annotated[
        SafeText | None, Field(max_length=TEXT_CHARS, description="Topic description.")
    ] = None
    parent_topic_id: Annotated[
        ItemId | None, Field(description="Parent topic ID (omit for a top-level topic).")
    ] = None


class AddLogInput(StrictInput):
    topic_id: Annotated[ItemId, Field(description="Topic the exchange belongs to.")]
    content: Annotated[
        RequiredText,
        Field(
            max_length=CONTENT_CHARS, description="One exchange (markdown), e.g. 'AI: ...\\nユーザー: ...'."
        ),
    ]


class AddDecisionInput(StrictInput):
    topic_id: Annotated[
        ItemId | None,
        Field(description="Topic it closes; omit to file it under the current project."),
    ] = None
    decision: Annotated[RequiredText, Field(max_length=TEXT_CHARS, description="What was decided.")]
    reason: Annotated[RequiredText, Field(max_length=TEXT_CHARS, description="Why it was decided.")]


class TopicListInput(StrictInput):
    project_id: Annotated[ItemId, Field(description="Project ID.")]
    parent_topic_id: Annotated[
        ItemId | None, Field(description="Parent topic ID (omit for top-level topics).")
    ] = None
    limit: Annotated[int, _limit(MAX_TOPICS, MAX_TOPICS)] = MAX_TOPICS


class TopicTreeInput(StrictInput):
    project_id: Annotated[ItemId, Field(description="Project ID.")]
    topic_id: Annotated[ItemId, Field(description="Root topic of the tree.")]
    limit: Annotated[int, _limit(MAX_TREE, MAX_TREE)] = MAX_TREE


class PageInput(StrictInput):
    topic_id: Annotated[ItemId, Field(description="Topic ID.")]
    start_id: Annotated[
        ItemId | None,
        Field(description="First entry to return: the previous page's next_start_id."),
    ] = None
    limit: Annotated[int, _limit(MAX_PAGE, MAX_PAGE)] = MAX_PAGE


class SearchInput(StrictInput):
    project_id: Annotated[ItemId, Field(description="Project ID.")]
    keyword: Annotated[
        RequiredText,
        Field(
            max_length=KEYWORD_CHARS,
            description="Substring to find (case-insensitive; several words must all occur).",
        ),
    ]
    limit: Annotated[int, _limit(MAX_PAGE, MAX_PAGE)] = MAX_PAGE


# -- outputs --------------------------------------------------------------------------------


class Project(Output):
    id: int
    name: str
    description: str | None
    asana_url: str | None
    created_at: str


class AddProjectOutput(Envelope):
    project_id: int
    name: str
    description: str | None
    asana_url: str | None
    created_at: str


class ProjectsOutput(Envelope):
    projects: list[Project]


class Topic(Output):
    id: int
    project_id: int
    title: str
    description: str | None
    parent_topic_id: int | None
    created_at: str


class AddTopicOutput(Envelope):
    topic_id: int
    project_id: int
    title: str
    description: str | None
    parent_topic_id: int | None
    created_at: str


class TopicsOutput(Envelope):
    topics: list[Topic]


class TopicNode(Topic):
    children: list[TopicNode]


class TopicTreeOutput(Output):
    tree: TopicNode
    truncated: bool = Field(description="The limit cut the tree: call again from a leaf topic.")


class Log(Output):
    id: int
    topic_id: int
    content: str
    created_at: str


class AddLogOutput(Envelope):
    log_id: int
    topic_id: int
    content: str
    created_at: str


class LogsOutput(Envelope):
    logs: list[Log]
    next_start_id: int | None = Field(description="start_id of the next page; null at the end.")


class Decision(Output):
    id: int
    topic_id: int | None
    decision: str
    reason: str
    created_at: str


class AddDecisionOutput(Envelope):
    decision_id: int
    topic_id: int | None
    decision: str
    reason: str
    created_at: str


class DecisionsOutput(Envelope):
    decisions: list[Decision]
    next_start_id: int | None = None
