"""Operations on the whole store, for every interface: the `admin` tool and the CLI.

health, statistics, online backup (with parts left out), verified restore, reindex (text
and vectors, with progress), orphan cleanup. What only a file-backed store can do is asked
of its optional protocols (store/base.py); a store without one says so clearly.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from memhub.core.errors import ErrorKind, MemhubError, conflict, invalid, not_found
from memhub.services.runtime import Runtime
from memhub.store.base import BACKUP_PARTS, Backups, Checks, FileSize, Store

# What `health` says about the whole store's content and activity: the admin role only.
STORE_WIDE = ("vectors_indexed", "embedder_queue", "vectors_pending", "index_rate")
HEALTH_CHECK_MAX_AGE_S = 300.0  # health re-reads the whole file at most this often
REPORT_SECONDS = 1.0  # progress of a reindex is reported this often
REINDEX_BATCH = 32
REINDEX_PIPELINE = 2  # batches per run_once (each stored while the next is embedded): progress every 64

Report = Callable[[float, float | None, str | None], Awaitable[None]]


async def _silent(done: float, total: float | None, message: str | None = None) -> None:
    return None


# Why a store without the Backups protocol refuses backup/restore (one line, what to do instead).
NO_BACKUPS = {
    "postgresql": "memhub backup and restore copy SQLite files; back up a PostgreSQL store"
    " with pg_dump and restore it with pg_restore (docs/deployment.md)",
}


def no_backups(store: Store) -> str | None:
    """Why `store` has no memhub backups (None: it has them)."""
    if isinstance(store, Backups):
        return None
    return NO_BACKUPS.get(store.backend, f"a {store.backend} store has no memhub backups")


def _backups(runtime: Runtime) -> Backups:
    store = runtime.store
    if not isinstance(store, Backups):
        raise MemhubError(ErrorKind.UNAVAILABLE, no_backups(store) or "")
    return store


async def health(runtime: Runtime) -> tuple[str, dict[str, Any]]:
    """(status "ok"/"degraded", details). Vectors are counted in the store, not the index."""
    store, embedding = runtime.store, runtime.embedding
    ok = True
    if isinstance(store, Checks):
        ok = await runtime.in_thread(partial(store.quick_check, HEALTH_CHECK_MAX_AGE_S))

    def vectors() -> tuple[int, int]:
        if embedding is None:
            return 0, 0
        with store.transaction(write=False) as tx:
            indexed = tx.vector_count(embedding.id)
            return indexed, max(0, tx.table_counts()["items"] - indexed)

    indexed, pending = await runtime.in_thread(vectors)
    backfill = runtime.backfill
    rate = backfill.rate if backfill is not None else None
    details: dict[str, Any] = {
        "database": "ok" if ok else "corrupt",
        "schema_version": await runtime.in_thread(store.schema_version),
        "embedder": embedding.id if embedding else None,
        "embedder_ready": embedding.ready if embedding else None,
        "embedder_queue": embedding.queue_depth if embedding else 0,
        "vectors_indexed": indexed,
        # items still without a vector (0 with no embedder), and how fast they are being made
        "vectors_pending": pending,
        "index_rate": None if rate is None else round(rate, 1),  # memories/s of this process
    }
    if embedding is not None and embedding.error:
        details["embedder_error"] = embedding.error
    status = "ok" if ok and (embedding is None or embedding.error is None) else "degraded"
    return status, details


async def stats(runtime: Runtime) -> dict[str, Any]:
    def counts() -> dict[str, int]:
        with runtime.store.transaction(write=False) as tx:
            return tx.table_counts()

    details: dict[str, Any] = {"tables": await runtime.in_thread(counts), "database": runtime.store.location}
    if isinstance(runtime.store, FileSize):
        details["database_bytes"] = runtime.store.file_size()
    return details


def backups_dir(runtime: Runtime) -> Path:
    """Where backups live: `$MEMHUB_HOME/backups/`."""
    return (runtime.home or Path.cwd()) / "backups"


def backup_path(runtime: Runtime, given: str | None, *, default_name: str | None) -> Path:
    """A backup file named by a tool call: a plain file name (or sub-path) inside the backups
    folder, nothing else. Absolute paths, `~`, `..`, backslashes and NUL are refused, so a
    caller can neither write nor probe files elsewhere; a person at the shell uses
    `memhub backup PATH` / `memhub restore PATH` for other places. Errors name no server path."""
    folder = backups_dir(runtime)
    if given is None or not given.strip():
        if default_name is None:
            raise invalid("backup_path is required")
        return folder / default_name
    text = given.strip()
    relative = Path(text)
    if (
        "\x00" in text
        or "\\" in text
        or text.startswith("~")
        or relative.is_absolute()
        or ".." in relative.parts
    ):
        raise invalid(
            "backup_path must be a file name inside the backups folder ($MEMHUB_HOME/backups); "
            "use `memhub backup PATH` at the shell for other places"
        )
    path = folder / relative
    root = folder.resolve()
    if root not in (path.resolve(), *path.resolve().parents):  # a symlink out of the folder
        raise invalid("backup_path must stay inside the backups folder ($MEMHUB_HOME/backups)")
    return path


def backup_name(runtime: Runtime, path: Path) -> str:
    """How a tool call's messages name a backup: its path inside the backups folder, never
    where that folder is on the server."""
    try:
        return path.relative_to(backups_dir(runtime)).as_posix()
    except ValueError:
        return path.name


def default_backup_name(clock_seconds: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(clock_seconds))
    return f"memhub-{stamp}.db"


async def backup(
    runtime: Runtime,
    path: Path,
    *,
    exclude: Sequence[str] = (),
    force: bool = False,
    shown: str | None = None,
) -> dict[str, Any]:
    """An online backup at `path` (written beside it, then renamed: never half a file).
    `shown`: how errors name the file (a tool call passes `backup_name`; default: the path)."""
    store = _backups(runtime)
    name = shown if shown is not None else str(path)
    unknown = sorted(set(exclude) - set(BACKUP_PARTS))
    if unknown:
        raise invalid(f"cannot leave out {unknown}; parts: {', '.join(BACKUP_PARTS)}")
    if path.exists() and path.is_dir():
        raise invalid(f"{name} is a directory")
    if path.exists() and not force:
        raise conflict(f"{name} exists; pass force=true to overwrite it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise invalid(f"cannot create the folder of {name}: {exc.strerror}") from None
    # this call's own partial file: two servers on one store (replicas) may take today's daily
    # backup at the same moment, and must not write into one file
    partial_file = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")
    try:
        await runtime.in_thread(lambda: store.backup_to(partial_file, exclude))
        partial_file.replace(path)
    except OSError as exc:
        raise MemhubError(ErrorKind.STORAGE, f"backup failed: {exc.strerror}") from None
    finally:
        partial_file.unlink(missing_ok=True)
    return {"path": str(path), "bytes": path.stat().st_size, "excluded": sorted(exclude)}


@dataclass(frozen=True)
class RestoreResult:
    path: Path
    restored: bool


async def restore(runtime: Runtime, path: Path, *, apply: bool, shown: str | None = None) -> RestoreResult:
    """Verify `path`; with `apply`, replace the live store's content with it.
    `shown`: how errors name the file (as for `backup`)."""
    store = _backups(runtime)
    name = shown if shown is not None else str(path)
    if not path.is_file():
        raise not_found(f"backup {name} not found")
    problems = await runtime.in_thread(lambda: store.verify_backup(path))
    if problems:
        raise invalid(f"{name} cannot be restored: {'; '.join(problems)}")
    if not apply:
        return RestoreResult(path, False)
    await runtime.in_thread(runtime.deferred.flush)  # the current file's pending events first
    await runtime.in_thread(lambda: store.restore_from(path))
    if runtime.search is not None:
        await runtime.in_thread(runtime.search.reset_vectors)
    if runtime.backfill is not None:
        runtime.backfill.reset()
    return RestoreResult(path, True)


async def reindex(runtime: Runtime, report: Report = _silent) -> dict[str, Any]:
    """Rebuild the text index and re-embed every item with the current embedder."""
    started = time.perf_counter()
    embedding, backfill = runtime.embedding, runtime.backfill
    embedder = embedding.id if embedding else None

    def rebuild() -> tuple[int, int]:
        with runtime.store.transaction(write=True) as tx:
            return tx.reindex_text(), tx.drop_vectors(embedder) if embedder else 0

    texts, dropped = await runtime.in_thread(rebuild)
    embedded = 0
    if backfill is not None and embedding is not None:
        backfill.reset()
        backfill.notify()
        await report(0, texts, "embedding")
        count = partial(_vectors, runtime, embedding.id)
        if backfill.running:  # the running backfill re-embeds (it was told the vectors went)
            while not await backfill.settle(REPORT_SECONDS):
                embedded = await runtime.in_thread(count)
                await report(embedded, texts, _progress(embedded, texts, backfill.rate))
            embedded = await runtime.in_thread(count)
        else:
            while batch := await backfill.run_once(REINDEX_BATCH, batches=REINDEX_PIPELINE):
                embedded += batch
                await report(embedded, texts, _progress(embedded, texts, backfill.rate))
    rate = backfill.rate if backfill is not None else None
    return {
        "text_indexed": texts,
        "vectors_dropped": dropped,
        "vectors_embedded": embedded,
        "embedder": embedder,
        "seconds": round(time.perf_counter() - started, 2),
        "index_rate": None if rate is None else round(rate, 1),  # memories/s while embedding
    }


def _progress(embedded: int, total: int, rate: float | None) -> str:
    """`embedded 640 of 1000, 360 pending, 212.5 memories/s`."""
    line = f"embedded {embedded} of {total}, {max(0, total - embedded)} pending"
    return line if rate is None else f"{line}, {rate:.1f} memories/s"


def _vectors(runtime: Runtime, embedder: str) -> int:
    with runtime.store.transaction(write=False) as tx:
        return tx.vector_count(embedder)


async def cleanup_orphans(runtime: Runtime) -> dict[str, int]:
    embedder = runtime.embedding.id if runtime.embedding else None

    def run() -> dict[str, int]:
        with runtime.store.transaction(write=True) as tx:
            return tx.cleanup_orphans(embedder)

    return await runtime.in_thread(run)
