"""Seed 004: projects, topic trees, discussion logs and decisions. Nothing is ever updated or deleted.

Every function runs inside the caller's transaction (`tx`) as `actor`. Topics, logs and
decisions are `items` rows of kind topic / log / decision in scope `project`: only members
see them (the store's visibility filter), only owners and editors write them. A log or a
decision points at its topic through `parent_id`, a sub-topic at its parent topic.
"""

from __future__ import annotations

from memhub.core.errors import invalid, not_found
from memhub.core.hashing import content_hash
from memhub.core.models import Kind, Principal, Scope, Viewer
from memhub.core.text import keyword_terms
from memhub.services import access, decision_model
from memhub.services.access import Need
from memhub.services.discussion import models as m
from memhub.store.base import ItemQuery, ItemRow, NewItem, ProjectRow, Tx


def _viewer(tx: Tx, actor: Principal) -> Viewer:
    return access.viewer(tx, actor)


def _project(row: ProjectRow) -> m.Project:
    return m.Project(
        id=row.id,
        name=row.name,
        description=row.description,
        asana_url=row.attrs.get("asana_url"),
        created_at=row.created_at,
    )


def _topic(row: ItemRow) -> m.Topic:
    assert row.project_id is not None
    return m.Topic(
        id=row.id,
        project_id=row.project_id,
        title=row.title or "",
        description=row.body if row.attrs.get("has_description") else None,
        parent_topic_id=row.parent_id,
        created_at=row.created_at,
    )


def _log(row: ItemRow) -> m.Log:
    assert row.parent_id is not None
    return m.Log(id=row.id, topic_id=row.parent_id, content=row.body, created_at=row.created_at)


def _decision(record: decision_model.DecisionRecord) -> m.Decision:
    return m.Decision(
        id=record.id,
        topic_id=record.topic_id,
        decision=record.title,
        reason=record.rationale,
        created_at=record.created_at,
    )


def _decisions(tx: Tx, rows: list[ItemRow]) -> list[m.Decision]:
    return [_decision(record) for record in decision_model.records(tx, rows)]


def _get_topic(tx: Tx, actor: Principal, topic_id: int) -> ItemRow:
    topic = tx.get_item(_viewer(tx, actor), topic_id, kinds=(Kind.TOPIC,))
    if topic is None:
        raise not_found(f"topic {topic_id} not found")
    return topic


def _topic_in_project(tx: Tx, actor: Principal, project_id: int, topic_id: int) -> ItemRow:
    topic = _get_topic(tx, actor, topic_id)
    if topic.project_id != project_id:
        raise invalid(f"topic {topic_id} does not belong to project {project_id}")
    return topic


# -- projects ---------------------------------------------------------------------------------


def add_project(tx: Tx, actor: Principal, args: m.AddProjectInput) -> m.AddProjectOutput:
    name = args.name.strip()
    access.name_is_free(tx, actor, name)
    attrs = {"asana_url": args.asana_url} if args.asana_url else {}
    tx.ensure_principal(actor.id)
    row = tx.insert_project(name, args.description, attrs, actor.id)
    p = _project(row)
    return m.AddProjectOutput(
        project_id=p.id,
        name=p.name,
        description=p.description,
        asana_url=p.asana_url,
        created_at=p.created_at,
    )


def get_projects(tx: Tx, actor: Principal, args: m.GetProjectsInput) -> m.ProjectsOutput:
    return m.ProjectsOutput(projects=[_project(r) for r in tx.list_projects(actor.id, args.limit)])


# -- writes -----------------------------------------------------------------------------------


def add_topic(tx: Tx, actor: Principal, args: m.AddTopicInput) -> m.AddTopicOutput:
    project = access.project(tx, actor, args.project_id, Need.WRITE).project
    if args.parent_topic_id is not None:
        _topic_in_project(tx, actor, project.id, args.parent_topic_id)
    description = args.description
    row = tx.insert_item(
        NewItem(
            kind=Kind.TOPIC,
            owner=actor.id,
            scope=Scope.PROJECT,
            project_id=project.id,
            parent_id=args.parent_topic_id,
            title=args.title,
            body=description or "",
            attrs={"has_description": description is not None},
            content_hash=content_hash(args.title, description),
        )
    )
    t = _topic(row)
    return m.AddTopicOutput(
        topic_id=t.id,
        project_id=t.project_id,
        title=t.title,
        description=t.description,
        parent_topic_id=t.parent_topic_id,
        created_at=t.created_at,
    )


def add_log(tx: Tx, actor: Principal, args: m.AddLogInput) -> m.AddLogOutput:
    topic = _get_topic(tx, actor, args.topic_id)
    assert topic.project_id is not None
    access.project(tx, actor, topic.project_id, Need.WRITE)
    row = tx.insert_item(
        NewItem(
            kind=Kind.LOG,
            owner=actor.id,
            scope=Scope.PROJECT,
            project_id=topic.project_id,
            parent_id=topic.id,
            body=args.content,
            content_hash=content_hash(args.content),
        )
    )
    return m.AddLogOutput(log_id=row.id, topic_id=topic.id, content=row.body, created_at=row.created_at)


def add_decision(tx: Tx, actor: Principal, args: m.AddDecisionInput) -> m.AddDecisionOutput:
    topic = _get_topic(tx, actor, args.topic_id) if args.topic_id is not None else None
    if topic is not None:
        assert topic.project_id is not None
        project = access.project(tx, actor, topic.project_id, Need.WRITE).project
    else:
        project = access.project(tx, actor, access.current_project(tx, actor).id, Need.WRITE).project
    new = decision_model.NewDecision(
        project_id=project.id,
        topic_id=args.topic_id,
        title=args.decision,
        rationale=args.reason,
        # what the decision is about: its topic, else the decision itself (dedup and supersede chains)
        target=(topic.title or args.decision) if topic is not None else args.decision,
        origin="discussion",
    )
    row = decision_model.create(tx, actor, new)
    d = _decision(decision_model.records(tx, [row])[0])
    return m.AddDecisionOutput(
        decision_id=d.id, topic_id=d.topic_id, decision=d.decision, reason=d.reason, created_at=d.created_at
    )


# -- reads ------------------------------------------------------------------------------------


def _children(tx: Tx, actor: Principal, args: m.TopicListInput, *, decided: bool | None) -> m.TopicsOutput:
    project = access.project(tx, actor, args.project_id, Need.READ).project
    if args.parent_topic_id is not None:
        _topic_in_project(tx, actor, project.id, args.parent_topic_id)
    rows = tx.query_items(
        _viewer(tx, actor),
        ItemQuery(
            kinds=(Kind.TOPIC,),
            project_id=project.id,
            parent_id=args.parent_topic_id,
            top_level=args.parent_topic_id is None,
            with_child_kind=Kind.DECISION if decided is True else None,
            without_child_kind=Kind.DECISION if decided is False else None,
            limit=args.limit,
        ),
    )
    return m.TopicsOutput(topics=[_topic(r) for r in rows])


def get_topics(tx: Tx, actor: Principal, args: m.TopicListInput) -> m.TopicsOutput:
    return _children(tx, actor, args, decided=None)


def get_decided_topics(tx: Tx, actor: Principal, args: m.TopicListInput) -> m.TopicsOutput:
    return _children(tx, actor, args, decided=True)


def get_undecided_topics(tx: Tx, actor: Principal, args: m.TopicListInput) -> m.TopicsOutput:
    return _children(tx, actor, args, decided=False)


def get_topic_tree(tx: Tx, actor: Principal, args: m.TopicTreeInput) -> m.TopicTreeOutput:
    project = access.project(tx, actor, args.project_id, Need.READ).project
    _topic_in_project(tx, actor, project.id, args.topic_id)
    rows = tx.subtree(_viewer(tx, actor), args.topic_id, Kind.TOPIC, args.limit + 1)
    truncated = len(rows) > args.limit
    nodes = {r.id: m.TopicNode(**_topic(r).model_dump(), children=[]) for r in rows[: args.limit]}
    for row in rows[: args.limit]:
        parent = nodes.get(row.parent_id) if row.parent_id is not None else None
        if parent is not None and row.id != args.topic_id:
            parent.children.append(nodes[row.id])
    return m.TopicTreeOutput(tree=nodes[args.topic_id], truncated=truncated)


def _page(tx: Tx, actor: Principal, args: m.PageInput, kind: str) -> tuple[list[ItemRow], int | None]:
    topic = _get_topic(tx, actor, args.topic_id)
    rows = tx.query_items(
        _viewer(tx, actor),
        ItemQuery(kinds=(kind,), parent_id=topic.id, min_id=args.start_id, limit=args.limit + 1),
    )
    next_start = rows[args.limit].id if len(rows) > args.limit else None
    return rows[: args.limit], next_start


def get_logs(tx: Tx, actor: Principal, args: m.PageInput) -> m.LogsOutput:
    rows, next_start = _page(tx, actor, args, Kind.LOG)
    return m.LogsOutput(logs=[_log(r) for r in rows], next_start_id=next_start)


def get_decisions(tx: Tx, actor: Principal, args: m.PageInput) -> m.DecisionsOutput:
    rows, next_start = _page(tx, actor, args, Kind.DECISION)
    return m.DecisionsOutput(decisions=_decisions(tx, rows), next_start_id=next_start)


def _search(tx: Tx, actor: Principal, args: m.SearchInput, kind: str) -> list[ItemRow]:
    project = access.project(tx, actor, args.project_id, Need.READ).project
    terms = keyword_terms(args.keyword)
    if not terms:
        raise invalid("keyword must contain at least one non-space character")
    return tx.query_items(
        _viewer(tx, actor),
        ItemQuery(kinds=(kind,), project_id=project.id, contains=terms, order="id_desc", limit=args.limit),
    )


def search_topics(tx: Tx, actor: Principal, args: m.SearchInput) -> m.TopicsOutput:
    return m.TopicsOutput(topics=[_topic(r) for r in _search(tx, actor, args, Kind.TOPIC)])


def search_decisions(tx: Tx, actor: Principal, args: m.SearchInput) -> m.DecisionsOutput:
    return m.DecisionsOutput(decisions=_decisions(tx, _search(tx, actor, args, Kind.DECISION)))
