"""The `memory_manage` tool: statistics, export/import, domain changes, batch deletes, cleanup.

Export formats: `json` is lossless and re-importable (one memory per line, so an import error
can name its line), `csv` and `markdown` are for people. Import is all or nothing: every
record is validated first and one bad record rejects the whole import, naming its line.

An import keeps each memory's `created_at` and `updated_at` (so `timerange` and `cleanup`
work off the original times; a time in the future is refused). The author is the importer,
except for an admin restoring records whose `author_id` names an existing user: no one else
can file a memory under another person's name. A project is named in a record by its name
or id; one the importer cannot write to and one that does not exist get the same answer.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import MemhubError, invalid, not_found
from memhub.core.hashing import content_hash
from memhub.core.ids import MEM, PROJ
from memhub.core.models import Kind
from memhub.services import access
from memhub.services.access import Need
from memhub.services.assoc import domains
from memhub.services.assoc import models as m
from memhub.services.assoc.memories import ASSOCIATION
from memhub.services.common import SafeText
from memhub.services.runtime import Call
from memhub.store.base import ItemQuery, ItemRow, NewItem, Tx

EXPORT_FORMAT = "memhub.assoc.export/v1"
MAX_EXPORT = 20_000
MAX_IMPORT = 20_000


class ImportRecord(BaseModel):
    """One memory of a json export (unknown keys are ignored: exports may grow fields)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    id: str | None = None
    content: SafeText = Field(min_length=1, max_length=m.CONTENT_CHARS)
    domain: m.Domain
    tags: list[SafeText] = Field(default_factory=list, max_length=m.MAX_TAGS)
    category: SafeText | None = Field(None, max_length=m.SHORT)
    importance: float = Field(0.5, ge=0, le=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    project: SafeText | None = Field(None, description="project name (json export) or proj_ id")
    author_id: SafeText | None = Field(None, max_length=m.SHORT)
    created_at: str | None = None
    updated_at: str | None = None


def _where(tx: Tx, call: Call, args: m.ManageInput) -> ItemQuery:
    domains.check_filters(tx, call.principal, args.project_id, args.session_id)
    return domains.memories_in(args.target_domain, args.project_id, args.session_id, MAX_EXPORT + 1)


def _stats(tx: Tx, call: Call, args: m.ManageInput) -> m.ManageOutput:
    viewer, where = access.viewer(tx, call.principal), _where(tx, call, args)
    return m.ManageOutput(
        action="stats",
        stats={
            "memories": tx.count_items(viewer, where),
            "by_domain": tx.group_counts(viewer, where, "scope"),
            "by_category": tx.group_counts(viewer, where, "category"),
            "top_tags": tx.tag_counts(viewer, where, 20),
            "mine": tx.count_items(viewer, replace(where, owner=call.principal.id)),
        },
    )


def _record(tx: Tx, row: ItemRow, names: dict[int, str]) -> dict[str, Any]:
    return {
        "id": MEM(row.id),
        "content": row.body,
        "domain": row.scope,
        "tags": list(row.tags),
        "category": row.category,
        "importance": row.importance,
        "metadata": row.attrs.get("metadata", {}),
        "project": names.get(row.project_id) if row.project_id is not None else None,
        "session_id": row.session_id,
        "author_id": row.owner,
        "access_count": row.access_count,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def _export(tx: Tx, call: Call, args: m.ManageInput) -> m.ManageOutput:
    rows = tx.query_items(access.viewer(tx, call.principal), _where(tx, call, args))
    if len(rows) > MAX_EXPORT:
        raise invalid(f"more than {MAX_EXPORT} memories: narrow the export with target_domain or project_id")
    names = {}
    for pid in {r.project_id for r in rows if r.project_id is not None}:
        project = tx.get_project(pid)
        names[pid] = project.name if project else PROJ(pid)
    records = [_record(tx, r, names) for r in rows]
    ids = {r.id for r in rows}
    links = [
        {"from": MEM(link.src), "to": MEM(link.dst), "type": link.subtype, "strength": link.strength}
        for link in tx.links_of(sorted(ids), [ASSOCIATION])
        if link.src in ids and link.dst in ids
    ]
    if args.export_format == "json":
        head = {"format": EXPORT_FORMAT, "exported_at": tx.now, "exported_by": call.principal.id}
        lines = [json.dumps(head, ensure_ascii=False)[:-1] + ', "memories": [']
        lines += [
            json.dumps(r, ensure_ascii=False) + ("," if i < len(records) - 1 else "")
            for i, r in enumerate(records)
        ]
        lines.append('], "associations": ' + json.dumps(links, ensure_ascii=False) + "}")
        data = "\n".join(lines)
    elif args.export_format == "csv":
        out = io.StringIO()
        columns = ["id", "domain", "project", "session_id", "category", "importance", "tags", "author_id",
                   "access_count", "created_at", "updated_at", "content"]  # fmt: skip
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for r in records:
            writer.writerow({**r, "tags": ";".join(r["tags"])})
        data = out.getvalue()
    else:
        parts = [f"# Memories ({len(records)})", ""]
        for r in records:
            where = r["domain"] + (f" / {r['project']}" if r["project"] else "")
            parts += [f"## {r['id']} — {where}", ""]
            parts += [f"- category: {r['category'] or '-'}", f"- tags: {', '.join(r['tags']) or '-'}",
                      f"- importance: {r['importance']}", f"- created: {r['created_at']}", ""]  # fmt: skip
            parts += ["> " + line for line in r["content"].splitlines()] + [""]
        data = "\n".join(parts)
    return m.ManageOutput(action="export", format=args.export_format, data=data, count=len(records))


def _records_with_lines(text: str) -> tuple[list[tuple[int, Any]], list[Any]]:
    """The memory records of an import, each with the line it starts on, and its associations."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise invalid(
            f"import_data is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None
    links: list[Any] = []
    if isinstance(parsed, list):
        records = parsed
    elif isinstance(parsed, dict) and isinstance(parsed.get("memories"), list):
        records, links = parsed["memories"], parsed.get("associations") or []
    else:
        raise invalid("import_data must be a memhub json export or a JSON array of memories")
    if len(records) > MAX_IMPORT:
        raise invalid(f"at most {MAX_IMPORT} memories per import")
    return list(zip(_element_lines(text, len(records)), records, strict=True)), list(links)


def _element_lines(text: str, count: int) -> list[int]:
    """Line numbers where the elements of the records array start (a small JSON scanner)."""
    decoder = json.JSONDecoder()
    stripped = text.lstrip()
    start = len(text) - len(stripped)
    position = _find_key_array(text, "memories") if stripped.startswith("{") else start + 1
    lines = []
    for _ in range(count):
        while text[position] in " \t\r\n,":
            position += 1
        lines.append(text.count("\n", 0, position) + 1)
        _, position = decoder.raw_decode(text, position)
    return lines


def _find_key_array(text: str, key: str) -> int:
    """Index just after the `[` of the top-level `"key": [` (strings are skipped, so keys inside
    memory content cannot match)."""
    depth, i, in_string, token = 0, 0, False, ""
    while i < len(text):
        char = text[i]
        if in_string:
            if char == "\\":
                i += 1
            elif char == '"':
                in_string = False
            else:
                token += char
        elif char == '"':
            in_string, token = True, ""
        elif char in "{[":
            if char == "[" and depth == 1 and token == key:
                return i + 1
            depth += 1
        elif char in "}]":
            depth -= 1
        elif char not in " \t\r\n:":
            token = ""
        i += 1
    raise invalid(f'"{key}" array not found')


def _project(tx: Tx, call: Call, record: ImportRecord) -> int | None:
    """The project of a project memory, named by its name or `proj_` id. A project the importer
    may not see is "not found" in the very words of one that does not exist."""
    if record.domain != "project":
        return None
    if not record.project:
        raise invalid("a project memory needs its project")
    found = tx.get_project_by_name(record.project)
    if found is not None:
        label = f"project {record.project!r}"
        return access.project(tx, call.principal, found.id, Need.WRITE, label=label).project.id
    if not record.project.startswith("proj_"):
        raise not_found(f"project {record.project!r} not found")
    return domains.writable_project(tx, call.principal, record.project)


def _times(tx: Tx, record: ImportRecord) -> tuple[str | None, str | None]:
    """The record's created_at and updated_at (None: now), as the store writes them."""
    times = []
    for name, value in (("created_at", record.created_at), ("updated_at", record.updated_at)):
        try:
            moment = isoformat(parse_iso(value)) if value else None
        except ValueError:
            raise invalid(f"{name} is not an ISO-8601 date-time") from None
        if moment is not None and moment > tx.now:
            raise invalid(f"{name} is in the future")
        times.append(moment)
    created, updated = times
    if created is not None and (updated is None or updated < created):
        updated = created
    return created, updated


def _author(tx: Tx, call: Call, record: ImportRecord, admin: bool) -> str:
    """Who the imported memory belongs to: the importer, or (an admin restoring another user's
    records) the record's author when that user exists. A session memory joins the importer's
    session, so it is always the importer's."""
    author = record.author_id
    if not admin or author is None or author == call.principal.id or record.domain == "session":
        return call.principal.id
    if tx.get_principal(author) is None:
        raise not_found(f"author_id {author!r} is not a user of this store (add the user first)")
    return author


IMPORT_REPORT_EVERY = 1_000  # records between two progress notifications of an import


def _import(tx: Tx, call: Call, args: m.ManageInput) -> m.ManageOutput:
    if not args.import_data:
        raise invalid("import_data is required to import")
    numbered, links = _records_with_lines(args.import_data)
    validated: list[tuple[int, ImportRecord]] = []
    for line, raw in numbered:
        try:
            validated.append((line, ImportRecord.model_validate(raw)))
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "record"
            raise invalid(
                f"record {len(validated) + 1} (line {line}): {where}: {first['msg']}; nothing was imported"
            ) from None
    current = access.current_session(tx, call.principal)
    admin = access.is_admin(tx, call.principal)
    mapping: dict[str, int] = {}
    created: list[str] = []
    for line, record in validated:
        try:
            project = _project(tx, call, record)
            if record.domain == "session" and current is None:
                raise invalid("session memories import into your current session: create one first")
            created_at, updated_at = _times(tx, record)
            owner = _author(tx, call, record, admin)
        except MemhubError as exc:
            raise invalid(
                f"record {len(created) + 1} (line {line}): {exc.message}; nothing was imported"
            ) from None
        row = tx.insert_item(
            NewItem(
                kind=Kind.MEMORY,
                owner=owner,
                scope=record.domain,
                project_id=project,
                session_id=current.id if record.domain == "session" and current else None,
                body=record.content,
                tags=list(dict.fromkeys(record.tags)),
                category=record.category,
                importance=record.importance,
                attrs={"metadata": record.metadata, "imported_from": record.id},
                content_hash=content_hash(record.content),
                created_at=created_at,
                updated_at=updated_at,
            )
        )
        if record.id:
            mapping[record.id] = row.id
        created.append(MEM(row.id))
        if len(created) % IMPORT_REPORT_EVERY == 0:
            done, total = len(created), len(validated)
            call.report_from_thread(done, total, f"imported {done} of {total}")
    for link in links:
        if isinstance(link, dict) and link.get("from") in mapping and link.get("to") in mapping:
            subtype = link.get("type") if link.get("type") in ("semantic", "temporal", "manual") else "manual"
            strength = (
                float(link.get("strength", 1.0)) if isinstance(link.get("strength"), int | float) else 1.0
            )
            tx.upsert_link(
                mapping[link["from"]], mapping[link["to"]], ASSOCIATION, subtype, max(0.0, min(1.0, strength))
            )
    return m.ManageOutput(action="import", count=len(created), memory_ids=created)


def _owned(tx: Tx, call: Call, ids: list[str] | None) -> list[ItemRow]:
    if not ids:
        raise invalid("memory_ids is required")
    return [domains.modifiable_memory(tx, call.principal, i) for i in dict.fromkeys(ids)]


def _change_domain(tx: Tx, call: Call, args: m.ManageInput) -> m.ManageOutput:
    if args.new_domain is None:
        raise invalid("new_domain is required to change the domain")
    rows = _owned(tx, call, args.memory_ids)
    where = domains.target(tx, call.principal, args.new_domain, args.project_id, args.session_id)
    if not args.dry_run:
        for row in rows:
            tx.update_item(row.id, {"scope": str(where.scope), "project_id": where.project_id,
                                    "session_id": where.session_id or row.session_id})  # fmt: skip
    return m.ManageOutput(
        action="change_domain", count=len(rows), memory_ids=[MEM(r.id) for r in rows], dry_run=args.dry_run
    )


def _batch_delete(tx: Tx, call: Call, args: m.ManageInput) -> m.ManageOutput:
    rows = _owned(tx, call, args.memory_ids)
    if not args.dry_run:
        tx.delete_items([r.id for r in rows])
    return m.ManageOutput(
        action="batch_delete", count=len(rows), memory_ids=[MEM(r.id) for r in rows], dry_run=args.dry_run
    )


def _cleanup(tx: Tx, call: Call, args: m.ManageInput) -> m.ManageOutput:
    if args.target_domain not in (None, "session"):
        raise invalid("cleanup removes session memories only: target_domain must be session")
    if args.cleanup_before is None:
        raise invalid("cleanup_before is required (an ISO-8601 date-time)")
    try:
        before = isoformat(parse_iso(args.cleanup_before))
    except ValueError:
        raise invalid("cleanup_before must be an ISO-8601 date-time such as 2024-01-01T00:00:00Z") from None
    query = ItemQuery(kinds=(Kind.MEMORY,), scopes=["session"], created_to=before, limit=1_000_000)
    if not access.is_admin(tx, call.principal):
        query = replace(query, owner=call.principal.id)
    if args.session_id is not None:
        query = replace(query, session_id=args.session_id)
    rows = [r for r in tx.query_items(access.viewer(tx, call.principal), query) if r.created_at < before]
    if not args.dry_run:
        tx.delete_items([r.id for r in rows])
    return m.ManageOutput(action="cleanup", count=len(rows), dry_run=args.dry_run)


def _categories(tx: Tx, call: Call, args: m.ManageInput) -> m.ManageOutput:
    counts = tx.group_counts(access.viewer(tx, call.principal), _where(tx, call, args), "category")
    return m.ManageOutput(action="list_categories", categories={k: v for k, v in counts.items() if k})


ACTIONS = {
    "stats": _stats,
    "export": _export,
    "import": _import,
    "change_domain": _change_domain,
    "batch_delete": _batch_delete,
    "cleanup": _cleanup,
    "list_categories": _categories,
}


async def manage(call: Call, args: m.ManageInput) -> m.ManageOutput:
    if args.memory_ids:
        for memory in args.memory_ids:
            MEM.require(memory)
    action = ACTIONS[args.action]
    return await call.transact(lambda tx: action(tx, call, args))
