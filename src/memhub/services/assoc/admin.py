"""The `admin` tool: health, statistics, backup and restore, reindex, orphan cleanup, domain migration.

Everything but `health_check` needs the admin role (the first user of a store is its admin);
`health_check` tells a member the state of the server, not the store-wide counts.
The store-wide operations are memhub's, not this toolset's: they live in services/ops.py,
which the CLI uses too; this module adds the seed's parameters and `migrate_domain`.
`restore` and `migrate_domain` change data wholesale: without `force=true` they only verify
and report what they would do.
"""

from __future__ import annotations

from dataclasses import replace

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import forbidden, invalid, not_found
from memhub.core.ids import PROJ
from memhub.core.models import Kind
from memhub.services import access, ops
from memhub.services.assoc import models as m
from memhub.services.runtime import Call
from memhub.store.base import BACKUP_PARTS, ItemQuery, Tx


async def _require_admin(call: Call) -> None:
    if not await call.read(lambda tx: access.is_admin(tx, call.principal)):
        raise forbidden("this action needs the admin role")


async def _backup(call: Call, args: m.AdminInput) -> m.AdminOutput:
    path = ops.backup_path(call.runtime, args.backup_path, default_name=ops.default_backup_name())
    exclude = sorted(set(BACKUP_PARTS) - set(args.include_data or BACKUP_PARTS))
    shown = ops.backup_name(call.runtime, path)
    details = await ops.backup(call.runtime, path, exclude=exclude, force=args.force, shown=shown)
    return m.AdminOutput(action="backup", status="ok", details=details)


async def _restore(call: Call, args: m.AdminInput) -> m.AdminOutput:
    path = ops.backup_path(call.runtime, args.backup_path, default_name=None)
    done = await ops.restore(call.runtime, path, apply=args.force, shown=ops.backup_name(call.runtime, path))
    if not done.restored:
        details = {"path": str(path), "restored": False, "hint": "pass force=true to restore"}
        return m.AdminOutput(action="restore", status="verified", details=details)
    return m.AdminOutput(action="restore", status="ok", details={"path": str(path), "restored": True})


async def _migrate(call: Call, args: m.AdminInput) -> m.AdminOutput:
    config = args.migration_config
    if config is None:
        raise invalid("migration_config (source_domain, target_domain) is required")
    criteria = dict(config.filter_criteria or {})
    allowed = {"category", "tags", "project_id", "before", "after", "owner", "target_project_id"}
    if set(criteria) - allowed:
        raise invalid(f"filter_criteria keys must be among {sorted(allowed)}")

    def work(tx: Tx) -> m.AdminOutput:
        query = ItemQuery(kinds=(Kind.MEMORY,), scopes=[config.source_domain], limit=1_000_000)
        try:
            if criteria.get("category"):
                query = replace(query, categories=[str(criteria["category"])])
            if criteria.get("tags"):
                query = replace(query, tags_any=[str(t) for t in criteria["tags"]])
            if criteria.get("project_id"):
                query = replace(query, project_id=PROJ.require(str(criteria["project_id"])))
            if criteria.get("owner"):
                query = replace(query, owner=str(criteria["owner"]))
            if criteria.get("after"):
                query = replace(query, created_from=isoformat(parse_iso(str(criteria["after"]))))
            if criteria.get("before"):
                query = replace(query, created_to=isoformat(parse_iso(str(criteria["before"]))))
        except ValueError:
            raise invalid("filter_criteria before/after must be ISO-8601 date-times") from None
        target_project = None
        if config.target_domain == "project":
            if not criteria.get("target_project_id"):
                raise invalid("moving into the project domain needs filter_criteria.target_project_id")
            target_project = PROJ.require(str(criteria["target_project_id"]))
            if tx.get_project(target_project) is None:
                raise not_found(f"project {criteria['target_project_id']} not found")
        if config.target_domain == "session":
            raise invalid("memories cannot be migrated into sessions (they belong to one user's session)")
        rows = tx.query_items(access.viewer(tx, call.principal), query)  # what the admin can see
        if args.force and config.source_domain != config.target_domain:
            for row in rows:
                tx.update_item(row.id, {"scope": config.target_domain, "project_id": target_project})
        return m.AdminOutput(
            action="migrate_domain",
            status="ok" if args.force else "dry_run",
            details={"matched": len(rows), "migrated": len(rows) if args.force else 0,
                     "source_domain": config.source_domain, "target_domain": config.target_domain},
        )  # fmt: skip

    return await call.transact(work)


async def admin(call: Call, args: m.AdminInput) -> m.AdminOutput:
    if args.action == "health_check":
        status, details = await ops.health(call.runtime)
        if not await call.read(lambda tx: access.is_admin(tx, call.principal)):
            details = {k: v for k, v in details.items() if k not in ops.STORE_WIDE}
        return m.AdminOutput(action="health_check", status=status, details=details)
    await _require_admin(call)
    if args.action == "system_stats":
        return m.AdminOutput(action="system_stats", status="ok", details=await ops.stats(call.runtime))
    if args.action == "backup":
        return await _backup(call, args)
    if args.action == "restore":
        return await _restore(call, args)
    if args.action == "reindex":
        details = await ops.reindex(call.runtime, call.report)
        return m.AdminOutput(action="reindex", status="ok", details=details)
    if args.action == "cleanup_orphans":
        counts = await ops.cleanup_orphans(call.runtime)
        return m.AdminOutput(action="cleanup_orphans", status="ok", details={"removed": counts})
    return await _migrate(call, args)
