"""The `admin` tool: health, statistics, backup and restore, reindex, orphan cleanup, domain migration.

Everything but `health_check` needs the admin role (the first user of a store is its admin).
`restore` and `migrate_domain` change data wholesale: without `force=true` they only verify
and report what they would do.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memhub.core.clock import isoformat, parse_iso
from memhub.core.errors import ErrorKind, MemhubError, conflict, forbidden, invalid, not_found
from memhub.services.assoc import access
from memhub.services.assoc import models as m
from memhub.services.assoc.access import MEMORY
from memhub.services.assoc.ids import parse_proj
from memhub.services.runtime import Call
from memhub.store.base import ItemQuery, Tx

if TYPE_CHECKING:
    from memhub.search.backfill import VectorBackfill
    from memhub.search.vectors import VectorIndex

HEALTH_CHECK_MAX_AGE_S = 300.0  # health_check re-reads the whole file at most this often
REPORT_SECONDS = 1.0  # progress of a reindex is reported this often
REINDEX_BATCH = 64
BACKUP_PARTS = {
    "memories": "DELETE FROM items WHERE kind = 'memory'",
    "associations": "DELETE FROM links WHERE type = 'association'",
    "sessions": "DELETE FROM sessions",
    "projects": "DELETE FROM projects",
}


async def _require_admin(call: Call) -> None:
    def check() -> bool:
        with call.runtime.store.transaction(write=False) as tx:
            return access.is_admin(tx, call.principal)

    if not await call.runtime.in_thread(check):
        raise forbidden("this action needs the admin role")


def _path(call: Call, given: str | None, *, default_name: str | None) -> Path:
    if given is None or not given.strip():
        if default_name is None:
            raise invalid("backup_path is required")
        home = call.runtime.home or Path.cwd()
        return home / "backups" / default_name
    path = Path(given).expanduser()
    if not path.is_absolute():
        path = (call.runtime.home or Path.cwd()) / "backups" / path
    return path


async def _health(call: Call) -> m.AdminOutput:
    store, embedding = call.runtime.store, call.runtime.embedding
    ok = await call.runtime.in_thread(partial(store.quick_check, HEALTH_CHECK_MAX_AGE_S))
    details: dict[str, Any] = {
        "database": "ok" if ok else "corrupt",
        "schema_version": store.schema_version(),
        "embedder": embedding.id if embedding else None,
        "embedder_ready": embedding.ready if embedding else None,
        "embedder_queue": embedding.queue_depth if embedding else 0,
    }
    vectors = call.runtime.search.vectors if call.runtime.search else None
    details["vectors_indexed"] = len(vectors) if vectors is not None else 0
    backfill = call.runtime.backfill
    details["vectors_pending"] = backfill is not None and backfill.running and backfill.pending
    status = "ok" if ok and (embedding is None or embedding.error is None) else "degraded"
    if embedding is not None and embedding.error:
        details["embedder_error"] = embedding.error
    await call.record("ok")
    return m.AdminOutput(action="health_check", status=status, details=details)


async def _stats(call: Call) -> m.AdminOutput:
    counts = await call.transact(lambda tx: tx.table_counts())
    details = {
        "tables": counts,
        "database_bytes": call.runtime.store.file_size(),
        "database": call.runtime.store.location,
    }
    return m.AdminOutput(action="system_stats", status="ok", details=details)


async def _backup(call: Call, args: m.AdminInput) -> m.AdminOutput:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = _path(call, args.backup_path, default_name=f"memhub-{stamp}.db")
    if path.exists() and not args.force:
        raise conflict(f"{path} exists; pass force=true to overwrite it")
    if path.exists() and path.is_dir():
        raise invalid(f"{path} is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise invalid(f"cannot create {path.parent}: {exc.strerror}") from None
    partial = path.with_name(path.name + ".partial")
    try:
        await call.runtime.in_thread(lambda: call.runtime.store.backup_to(partial))
        dropped = sorted(set(BACKUP_PARTS) - set(args.include_data or BACKUP_PARTS))
        if dropped:
            with sqlite3.connect(partial) as conn:
                conn.execute("PRAGMA foreign_keys = ON")
                for part in dropped:
                    conn.execute(BACKUP_PARTS[part])
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise MemhubError(ErrorKind.STORAGE, f"backup failed: {exc.strerror}") from None
    await call.record("ok")
    return m.AdminOutput(
        action="backup",
        status="ok",
        details={"path": str(path), "bytes": path.stat().st_size, "excluded": dropped},
    )


async def _restore(call: Call, args: m.AdminInput) -> m.AdminOutput:
    path = _path(call, args.backup_path, default_name=None)
    if not path.is_file():
        raise not_found(f"backup {path} not found")
    problems = await call.runtime.in_thread(lambda: call.runtime.store.verify_backup(path))
    if problems:
        raise invalid(f"{path} cannot be restored: {'; '.join(problems)}")
    if not args.force:
        await call.record("ok")
        details = {"path": str(path), "restored": False, "hint": "pass force=true to restore"}
        return m.AdminOutput(action="restore", status="verified", details=details)
    await call.runtime.in_thread(lambda: call.runtime.store.restore_from(path))
    if call.runtime.search is not None and call.runtime.search.vectors is not None:
        await call.runtime.in_thread(call.runtime.search.vectors.reset)
    if call.runtime.backfill is not None:
        call.runtime.backfill.reset()
    await call.record("ok")
    return m.AdminOutput(action="restore", status="ok", details={"path": str(path), "restored": True})


def _indexed(index: VectorIndex | None, backfill: VectorBackfill, before: int) -> int:
    """Vectors made since the reindex began: the index's size when there is one (a batch the
    backfill had in flight when the vectors were dropped would be counted twice by the
    backfill's counter; vectors written meanwhile by other writers do count here)."""
    if index is None:
        return backfill.embedded - before
    index.refresh()
    return len(index)


async def _reindex(call: Call) -> m.AdminOutput:
    started = time.perf_counter()
    embedding = call.runtime.embedding
    embedder = embedding.id if embedding else None

    def rebuild(tx: Tx) -> tuple[int, int]:
        return tx.reindex_text(), tx.drop_vectors(embedder) if embedder else 0

    backfill = call.runtime.backfill
    texts, dropped = await call.transact(rebuild)
    embedded = 0
    if backfill is not None and embedding is not None:
        before = backfill.embedded
        backfill.reset()
        await call.report(0, texts, "embedding")
        if backfill.running:  # the running backfill re-embeds (the transaction notified it)
            count = partial(_indexed, backfill.vectors, backfill, before)
            while not await backfill.settle(REPORT_SECONDS):
                embedded = await call.runtime.in_thread(count)
                await call.report(embedded, texts, f"embedded {embedded} of {texts}")
            embedded = await call.runtime.in_thread(count)
        else:
            while batch := await backfill.run_once(REINDEX_BATCH):
                embedded += batch
                await call.report(embedded, texts, f"embedded {embedded} of {texts}")
    return m.AdminOutput(
        action="reindex",
        status="ok",
        details={"text_indexed": texts, "vectors_dropped": dropped, "vectors_embedded": embedded,
                 "embedder": embedder, "seconds": round(time.perf_counter() - started, 2)},
    )  # fmt: skip


async def _migrate(call: Call, args: m.AdminInput) -> m.AdminOutput:
    config = args.migration_config
    if config is None:
        raise invalid("migration_config (source_domain, target_domain) is required")
    criteria = dict(config.filter_criteria or {})
    allowed = {"category", "tags", "project_id", "before", "after", "owner", "target_project_id"}
    if set(criteria) - allowed:
        raise invalid(f"filter_criteria keys must be among {sorted(allowed)}")

    def work(tx: Tx) -> m.AdminOutput:
        query = ItemQuery(kinds=(MEMORY,), scopes=[config.source_domain], limit=1_000_000)
        try:
            if criteria.get("category"):
                query = replace(query, categories=[str(criteria["category"])])
            if criteria.get("tags"):
                query = replace(query, tags_any=[str(t) for t in criteria["tags"]])
            if criteria.get("project_id"):
                query = replace(query, project_id=parse_proj(str(criteria["project_id"])))
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
            target_project = parse_proj(str(criteria["target_project_id"]))
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
        return await _health(call)
    await _require_admin(call)
    if args.action == "system_stats":
        return await _stats(call)
    if args.action == "backup":
        return await _backup(call, args)
    if args.action == "restore":
        return await _restore(call, args)
    if args.action == "reindex":
        return await _reindex(call)
    if args.action == "cleanup_orphans":
        embedder = call.runtime.embedding.id if call.runtime.embedding else None
        counts = await call.transact(lambda tx: tx.cleanup_orphans(embedder))
        return m.AdminOutput(action="cleanup_orphans", status="ok", details={"removed": counts})
    return await _migrate(call, args)
