"""Decisions entered by people: `memhub decision add|supersede|deprecate|list|show`,
`memhub proposal list|show|accept|reject` and `memhub reflect`.

They run the decisions toolset's services as a human principal (`via="cli"`): no `[via MCP]`
marker, the +0.1 authority in searches, and agents may not supersede them. Accepting a
proposal needs the admin role and waits out the review window, as over MCP, but not the
secret (a person at the shell already holds the database).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ValidationError

from memhub.cli.container import Container
from memhub.core.errors import MemhubError
from memhub.mcp.toolkit import invalid_arguments
from memhub.services import decision_model
from memhub.services.decision_model import STATUSES
from memhub.services.decisions import errors, proposals, reflect, service
from memhub.services.decisions import models as m
from memhub.services.runtime import Call

COMMANDS = ("decision", "proposal", "reflect")


def _text_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--title", required=True, help="short title")
    parser.add_argument("--target", required=True, help="what it applies to, e.g. database_policy")
    parser.add_argument("--rationale", required=True, help="why")
    parser.add_argument("--consequence", action="append", default=[], help="an expected effect (repeatable)")


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    decision = commands.add_parser("decision", help="record and read decisions as a person")
    actions = decision.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="record a decision in the current project")
    _text_args(add)
    add.add_argument("--draft", action="store_true", help="record it as a draft")
    sup = actions.add_parser("supersede", help="replace decisions with a new one")
    sup.add_argument("old", nargs="+", help="decision ids (dec_N or N)")
    _text_args(sup)
    dep = actions.add_parser("deprecate", help="retire a decision without a successor")
    dep.add_argument("id", help="decision id (dec_N or N)")
    dep.add_argument("--reason", required=True, help="why it no longer holds")
    listed = actions.add_parser("list", help="the current project's decisions, newest first")
    listed.add_argument("--status", choices=STATUSES)
    listed.add_argument("--target")
    listed.add_argument("--limit", type=int, default=50)
    show = actions.add_parser("show", help="one decision with its supersede chain (JSON)")
    show.add_argument("id", help="decision id (dec_N or N)")

    proposal = commands.add_parser("proposal", help="review proposals (files in $MEMHUB_HOME/proposals)")
    verbs = proposal.add_subparsers(dest="action", required=True)
    verbs.add_parser("list", help="every proposal with its status and review time left")
    for name, text in (("show", "print a proposal"), ("accept", "accept it (admin, after the window)")):
        verbs.add_parser(name, help=text).add_argument("proposal_id", help="the proposal's file name")
    rej = verbs.add_parser("reject", help="close it without a decision (admin)")
    rej.add_argument("proposal_id", help="the proposal's file name")
    rej.add_argument("--reason", default="", help="why")

    ref = commands.add_parser("reflect", help="propose one decision where active decisions disagree")
    ref.add_argument("--project", dest="reflect_project", help="only this project (default: all yours)")


def _call(container: Container, tool: str) -> Call:
    person = replace(container.principal, via="cli")
    return container.call("decisions", person, f"cli.{tool}")


def _print(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def _model(model: type[BaseModel], **values: Any) -> Any:
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise invalid_arguments(exc) from None


async def _decision(container: Container, args: argparse.Namespace) -> int:
    call = _call(container, f"decision.{args.action}")
    texts = {}
    if "title" in args:
        texts = {"title": args.title, "target": args.target, "rationale": args.rationale}
    if args.action == "add":
        add = _model(m.RecordInput, **texts, consequences=args.consequence)
        _print((await service.record(call, add, draft=args.draft)).model_dump())
    elif args.action == "supersede":
        new = _model(m.SupersedeInput, **texts, consequences=args.consequence, old_decision_ids=args.old)
        _print((await service.supersede(call, new)).model_dump())
    elif args.action == "deprecate":
        record = await service.deprecate(call, args.id, args.reason)
        print(f"{record.public_id} {record.status}")
    elif args.action == "list":
        actor = call.principal
        found = await call.read(
            lambda tx: service.listing(tx, actor, status=args.status, target=args.target, limit=args.limit)
        )
        await call.record("ok")
        for r in found:
            print(f"{r.public_id}\t{r.status}\t{r.target}\t{decision_model.marked(r.title, r.via)}")
    else:
        shown = await call.read(lambda tx: service.details(tx, call.principal, args.id))
        await call.record("ok")
        _print(shown)
    return 0


async def _proposal(container: Container, args: argparse.Namespace) -> int:
    call = _call(container, f"proposal.{args.action}")
    folder, cipher = proposals.directory(call), proposals.cipher_of(call)
    if args.action == "list":
        for p in proposals.listing(folder, cipher):
            left = proposals.time_left(call, p)
            wait = f"review {max(0, round(left))} s left" if left > 0 and p.status == "open" else ""
            print(f"{p.name}\t{p.status}\t{p.meta.get('target', '')}\t{wait}".rstrip())
        return 0
    if args.action == "show":
        sys.stdout.write(proposals.load(folder, args.proposal_id, cipher).text)
        return 0
    if args.action == "accept":
        print((await proposals.accept(call, args.proposal_id)).message)
        return 0
    rejected = await proposals.reject(call, args.proposal_id, args.reason)
    print(f"{rejected.name} {rejected.status}")
    return 0


async def run(container: Container, args: argparse.Namespace) -> int:
    try:
        if args.command == "decision":
            return await _decision(container, args)
        if args.command == "proposal":
            return await _proposal(container, args)
        written = await reflect.reflect(_call(container, "reflect"), args.reflect_project)
        for path in written:
            print(path)
        if not written:
            print("no conflicting or duplicate active decisions", file=sys.stderr)
        return 0
    except MemhubError as exc:
        print(f"memhub: {errors.label(exc)}: {exc.message}", file=sys.stderr)
        return 1
