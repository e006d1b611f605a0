"""Gives vectors to items that have none for the current embedder.

That covers items written before the model loaded, items written by another process, and
every item after a switch of model (so this is also the "reindex"). Items are read in
prefetched runs (`missing_vectors` scans the item table, so it is called rarely), embedded
in batches off the event loop, and stored one write transaction per batch.

`run_forever` follows new items without rescanning the table on every poll: it scans when
`notify()` says this process wrote items (call it after inserts and text edits), when another
process has committed (the store's `data_version`), and every `rescan_seconds` regardless.

Several processes on one store (replicas on PostgreSQL, processes sharing a SQLite file) each
run a backfill; each missing vector is computed by one of them. Before embedding a batch, a
backfill claims its items (`vector_claims`, store/sql/claims.py): a lease of `LEASE_S`
released in the transaction that stores the vectors. Items another process holds are set
aside and looked at again on every poll: once their vectors are stored they are done; if the
lease runs out first (that process died), this one claims them. A process that stops drops
its claims; the claims of a process on this host that no longer runs (killed) are dropped by
the next one that meets them. A process that restarts scans every id again, so it picks up
whatever is missing.

Read your writes: `readiness(timeout)` is what a read that needs vectors calls first. It waits,
within `timeout` in all, for a model still loading and then, `PENDING_WAIT_S` at most, for this
process's writes to get their vectors — but only for a backlog it can clear in that time
(the batches under way, the prefetched rows and the writes not scanned yet, at the measured
throughput: storing and linking included); otherwise it answers at once. The judgement is made
again whenever the backfill learns more while the read waits: a write of many items (an
import) counts as one until the backfill's scan has read it, and the read then stops waiting
at once instead of waiting out its time. The `Readiness` it returns says what the read may
miss (the model not loaded: keyword search alone; items still without vectors).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

import anyio
import numpy as np

from memhub.core.errors import MemhubError, invalid
from memhub.core.memory import release_free_memory
from memhub.core.tasks import task_group
from memhub.search.embedders.base import EmbedderUnavailable
from memhub.search.embedding import EmbeddingService
from memhub.search.vector_search import VectorSearch
from memhub.store.base import ChangeProbe, Store

log = logging.getLogger(__name__)

# Told of every batch of vectors stored: (item id, unit vector) pairs (e.g. to link neighbours).
OnEmbedded = Callable[[list[tuple[int, np.ndarray]]], Awaitable[object]]

# What a model may raise on one bad input (the C engine via ctypes, numpy shape checks).
_MODEL_ERRORS = (ValueError, RuntimeError, OSError)


FIRST_GUESS_S = 0.05  # seconds per item before any batch was timed (a model on one core)
RATE_BATCHES = 16  # the indexing rate is measured over this many recent batches
LEASE_S = 300.0  # how long a claim on a batch of items lasts (embedding it takes seconds)
PIPELINE = 8  # batches run_forever embeds back to back (each stored while the next is embedded)
PENDING_WAIT_S = 0.5  # a read waits at most this long for this process's writes to get vectors


@dataclass(frozen=True, slots=True)
class Readiness:
    """What a read that needs vectors can rely on (`VectorBackfill.readiness`)."""

    model: Literal["ready", "loading", "unavailable"]
    caught_up: bool  # this process's writes have their vectors and semantic links
    pending: int  # items known to wait for vectors (a lower bound; 0: none known)

    @property
    def complete(self) -> bool:
        return self.model == "ready" and self.caught_up and self.pending == 0


@runtime_checkable
class _Deletions(Protocol):
    def vector_deletions(self, embedder: str, after_seq: int) -> tuple[int, list[int]]: ...


@runtime_checkable
class _Claims(Protocol):
    """A transaction that can claim items for embedding (store/sql/claims.py)."""

    def claim_vectors(
        self, embedder: str, ids: Sequence[int], owner: str, *, now: float, lease_s: float
    ) -> tuple[list[int], list[int]]: ...
    def release_claims(self, embedder: str, ids: Sequence[int]) -> None: ...
    def claim_owners(self) -> list[str]: ...
    def drop_claims_of(self, owners: Sequence[str]) -> None: ...


RELEASE_S = 5.0  # a stopping backfill waits at most this long to drop its claims (then they run out)
REAP_EVERY_S = 5.0  # how often claims held elsewhere are checked for a dead process on this host


def _here() -> str:
    """This host and pid namespace: the part of an owner (host/boot/pidns:pid:nonce) that says
    whether its pid can be looked up from here (replicas on one host's network, containers
    that share a hostname, have pid namespaces of their own)."""
    parts = [socket.gethostname()]
    try:
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8])
        parts.append(os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]"))
    except OSError:
        parts.append("?")  # no /proc: never taken for a process of this host
    return "/".join(parts)


HERE = _here()
_LIVE: set[str] = set()  # owners of this process's backfills that have not stopped


def _gone_here(owner: str) -> bool:
    """Whether `owner` was a process of this host and pid namespace that no longer runs: its
    claims need not wait out their lease (a SIGKILL, a crash). Owners elsewhere: unknown."""
    where, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if where != HERE or where.endswith("/?") or not pid_text.isdigit():
        return False
    if int(pid_text) == os.getpid():
        return owner not in _LIVE  # an earlier process with this pid (a container's pid 1)
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


class VectorBackfill:
    def __init__(
        self,
        store: Store,
        embedding: EmbeddingService,
        vectors: VectorSearch | None = None,
        *,
        prefetch: int = 1024,
        on_embedded: OnEmbedded | None = None,
    ) -> None:
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        self.store = store
        self.embedding = embedding
        self.vectors = vectors
        self.prefetch = prefetch
        self.on_embedded = on_embedded
        self.embedded = 0  # items embedded since start (a metric)
        self.scans = 0  # missing_vectors calls (a metric)
        self.failed = 0  # texts the model failed on (a metric)
        self.owner = f"{HERE}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # of claims
        _LIVE.add(self.owner)
        self.elsewhere: set[int] = set()  # items another process has claimed, not embedded yet
        self._next_reap = 0.0  # (monotonic) when claims held elsewhere are next checked
        self._queue: deque[tuple[int, str]] = deque()
        self._more = False
        self._notified = False
        self._wake: anyio.Event | None = None
        self._watermark = 0  # every item id up to here has a vector or is queued
        self._log_seq: int | None = None  # vector_log position: deletions after it are re-embedded
        self._running = False  # the model is loaded and run_forever is following writes
        # Read your writes by generation: each write of this process (`notify`) is one more
        # generation; a scan that began after generation g and drained its queue makes every
        # write up to g embedded. A search waits for the writes before it, not for later ones
        # (under a steady stream of writes there is always a later one).
        self._written = 0
        self._caught_up = 0
        self._scan_generation = 0
        self._settled: anyio.Event | None = None
        self._started: anyio.Event | None = None  # set when run_forever follows writes
        self._begun = False  # run_forever was called
        self.seconds_per_item = FIRST_GUESS_S  # measured: a moving average over batches
        self._in_hand = 0  # items taken from the queue, being embedded or stored
        self._batches: deque[tuple[float, int]] = deque(maxlen=RATE_BATCHES)  # (seconds, stored)

    def reset(self) -> None:
        """Look at every item again on the next scan (after a reindex or a restore)."""
        self._watermark = 0
        self._queue.clear()

    def _drop_queue(self) -> None:
        """Forget prefetched rows (their text may have changed) and scan them again."""
        if self._queue:
            self._watermark = min(self._watermark, min(item for item, _ in self._queue) - 1)
        self._queue.clear()

    @property
    def running(self) -> bool:
        """The model is loaded and new writes are being followed."""
        return self._running

    @property
    def pending(self) -> bool:
        """This process wrote texts whose vectors (and semantic links) are not made yet."""
        return self._caught_up < self._written

    @property
    def under_way(self) -> int:
        """Items taken from the queue and not yet stored: being claimed, embedded or stored."""
        return self._in_hand

    @property
    def backlog(self) -> int:
        """Items fetched and waiting to be embedded (a lower bound of the real backlog)."""
        return len(self._queue)

    @property
    def rate(self) -> float | None:
        """Memories given vectors per second of work, over the last batches (embedding,
        storing and their follow-up work; idle time not counted). None before any batch."""
        seconds = sum(t for t, _ in self._batches)
        if not self._batches or seconds <= 0:
            return None
        return sum(n for _, n in self._batches) / seconds

    def notify(self) -> None:
        """Items were written by this process: have `run_forever` look now. Call from the event loop."""
        self._notified = True
        self._written += 1
        if self._wake is not None:
            self._wake.set()

    async def settle(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds until this process's writes have their vectors (and their
        `on_embedded` work is done); True when caught up. Returns at once when nothing is
        pending or the backfill is not running (no model yet): a search right after a store
        then sees the new memory's vector without every store waiting for the model."""
        target = self._written
        if self._caught_up >= target or not self._running:
            return True
        with anyio.move_on_after(timeout):
            while self._caught_up < target:
                if self._settled is None:
                    self._settled = anyio.Event()
                await self._settled.wait()
        return self._caught_up >= target

    def _estimate(self) -> int:
        """Items waiting for vectors as far as this process knows: the batches under way, the
        prefetched queue and the writes since the last scan (one item each, at least)."""
        return self._in_hand + len(self._queue) + max(0, self._written - self._scan_generation)

    def _item_seconds(self) -> float:
        """Seconds an item takes to get its vector and its follow-up work done: the measured
        throughput (storing and linking included), or the model's own time while none is known."""
        rate = self.rate
        return max(self.seconds_per_item, 1.0 / rate if rate else 0.0)

    async def readiness(self, timeout: float) -> Readiness:
        """Wait, `timeout` seconds at most in all, for the model (when it is loading) and for
        this process's writes to have their vectors — for those only `PENDING_WAIT_S` at most,
        and only when the known backlog (batches under way included) can be embedded in that
        time; otherwise return at once. Never raises."""
        deadline = anyio.current_time() + timeout
        embedding = self.embedding
        if not (embedding.started or self._begun):
            return Readiness("ready", True, 0)  # no vectors made in the background here (a one-shot command)
        if not embedding.ready:
            if embedding.loading:
                await embedding.wait_ready(timeout)
            if not embedding.ready:
                state: Literal["loading", "unavailable"] = "loading" if embedding.loading else "unavailable"
                return Readiness(state, self._caught_up >= self._written, self._estimate())
        if not self._running:  # loaded just now: run_forever starts following within moments
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                while not self._running:
                    if self._started is None:
                        self._started = anyio.Event()
                    await self._started.wait()
            if not self._running:
                return Readiness("ready", self._caught_up >= self._written, self._estimate())
        target = self._written
        deadline = min(deadline, anyio.current_time() + PENDING_WAIT_S)
        while self._caught_up < target:  # judged again as the backfill learns (a scan, a batch)
            left = deadline - anyio.current_time()
            if left <= 0 or self._more or self._estimate() * self._item_seconds() > left:
                break  # a backlog it cannot clear in time (an import just scanned): answer now
            with anyio.move_on_after(left):
                if self._settled is None:
                    self._settled = anyio.Event()
                await self._settled.wait()
        backlog = self._estimate() if (self._queue or self._more or self._caught_up < target) else 0
        if self._more:
            backlog = max(backlog, self.prefetch)
        return Readiness("ready", self._caught_up >= target, backlog)

    def _mark_settled(self, generation: int | None = None) -> None:
        """Every write up to `generation` (None: all) has its vector and its follow-up work."""
        self._caught_up = max(self._caught_up, self._written if generation is None else generation)
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        """Reads waiting in `settle` / `readiness` look again (caught up? a backlog now known?)."""
        if self._settled is not None:
            self._settled.set()
            self._settled = None

    async def run_once(self, batch: int = 64, *, batches: int = 1) -> int:
        """Embed and store up to `batches` batches of up to `batch` items lacking a vector;
        returns how many were stored. With several, a batch's storing and follow-up work
        (`on_embedded`: semantic links) runs while the next batch is embedded, so the model
        does not wait for them; no further batch is started once this process writes
        (`notify`: the next scan reads its writes first), once another process commits (the
        prefetched texts may have been edited) or when the prefetched rows run out.
        While searches are under way (`EmbeddingService.searching`) a batch is stored before the
        next one is embedded: the other core is theirs."""
        if batch < 1 or batches < 1:
            raise invalid("batch and batches must be at least 1", batch=batch, batches=batches)
        written = self._written  # a write from here on ends the run (counted before the scan)
        version = await anyio.to_thread.run_sync(self._data_version) if batches > 1 else None
        if not self._queue:
            limit = max(batch, self.prefetch)
            self._queue.extend(await anyio.to_thread.run_sync(self._missing, limit))
            self._more = len(self._queue) >= limit  # a full fetch: the table may hold more
            self._wake_waiters()  # the backlog is known now: a read waiting for it may not wait
        stored: list[int] = []
        since = [time.perf_counter()]  # the rate counts this run's time once, batch by batch

        async def finish(rows: list[int], blobs: list[tuple[int, bytes]]) -> None:
            with anyio.CancelScope(shield=True):  # a failing next batch waits for this one
                try:
                    stored.append(await self._finish(rows, blobs))
                finally:
                    self._in_hand -= len(rows)
            if stored[-1]:
                now = time.perf_counter()
                self._batches.append((now - since[0], stored[-1]))
                since[0] = now
                self._wake_waiters()  # the backlog is smaller and the rate known better: judge again

        current = await self._embed_next(batch)
        for taken in range(1, batches + 1):
            if current is None:
                break
            # searches under way: a core is theirs; this process wrote: its next scan reads that first
            stop = taken == batches or not self._queue or self._written != written or self.embedding.searching
            if not stop:  # another process committed: the prefetched texts may be edited, rescan
                try:
                    stop = await anyio.to_thread.run_sync(self._data_version) != version
                except BaseException:  # embedded, never stored: read again, out of the hand
                    self._in_hand -= len(current[0])
                    self._read_again(current[0])
                    raise
            if stop:
                await finish(*current)
                break
            finishing = current
            try:
                async with task_group() as tg:  # an error of the next batch is raised as itself
                    tg.start_soon(finish, *current)
                    current = await self._embed_next(batch)
            except BaseException:
                if current is not finishing and current is not None:  # embedded, never stored
                    self._in_hand -= len(current[0])
                    self._read_again(current[0])
                raise
        return sum(stored)

    async def _embed_next(self, batch: int) -> tuple[list[int], list[tuple[int, bytes]]] | None:
        """Claim the next prefetched rows this process may embed (up to `batch`) and embed them:
        (their ids, the vectors made); None when no row is left to claim."""
        rows: list[tuple[int, str]] = []
        while self._queue and not rows:  # the next batch this process may embed
            offered = [self._queue.popleft() for _ in range(min(batch, len(self._queue)))]
            self._in_hand += len(offered)  # from the queue to the hand at once: a read's estimate holds
            try:
                mine, held = await anyio.to_thread.run_sync(self._claim, [item for item, _ in offered])
            except BaseException:
                self._in_hand -= len(offered)
                self._queue.extendleft(reversed(offered))  # not lost: offered again next round
                raise
            rows = [row for row in offered if row[0] in set(mine)]
            self._in_hand -= len(offered) - len(rows)  # another process embeds the rest
            self.elsewhere.update(held)
        if not rows:
            return None
        started = time.perf_counter()
        try:
            blobs = await self._embed(rows)
        except BaseException:
            self._in_hand -= len(rows)
            self._queue.extendleft(reversed(rows))  # not lost: retried by the next round
            raise
        per_item = (time.perf_counter() - started) / len(rows)
        self.seconds_per_item = 0.7 * self.seconds_per_item + 0.3 * per_item
        return [item for item, _ in rows], blobs

    async def _finish(self, claimed: list[int], blobs: list[tuple[int, bytes]]) -> int:
        """Store a batch's vectors (releasing its claims), refresh the index and run the
        follow-up work; returns how many were stored. When they cannot be stored (the store
        failed), the next scan that starts once the queue is empty reads the batch's items again."""
        try:
            stored = await anyio.to_thread.run_sync(self._store_vectors, blobs, claimed)
        except BaseException:
            self._read_again(claimed)  # embedded again later (they are still claimed by this process)
            raise
        if not blobs:
            return 0
        if self.vectors is not None:
            await anyio.to_thread.run_sync(self.vectors.refresh)
        self.embedded += stored
        if self.on_embedded is not None and stored:
            try:
                await self.on_embedded([(item, np.frombuffer(blob, dtype="<f4")) for item, blob in blobs])
            except MemhubError as exc:
                log.warning("after embedding %d items: %s", len(blobs), exc.message)
        return stored

    def _read_again(self, ids: Sequence[int]) -> None:
        """Items taken from the queue and not stored: the next scan reads them again. Until it
        has (`_more`: the scan runs once the queue is drained), nothing is settled."""
        if ids:
            self._watermark = min(self._watermark, min(ids) - 1)
            self._more = True

    async def _embed(self, rows: list[tuple[int, str]]) -> list[tuple[int, bytes]]:
        """(item id, vector bytes) for `rows`; a text the model fails on, or gives NaN or infinity
        for, is skipped and logged (one bad item cannot stall the rest); the next scan retries it."""
        blobs: list[tuple[int, bytes]] = []
        try:
            matrix = await self.embedding.embed_passages([text for _, text in rows])
        except _MODEL_ERRORS as exc:
            if len(rows) == 1:
                self.failed += 1
                log.warning("item %d could not be embedded by %s: %r", rows[0][0], self.embedding.id, exc)
                return []
            for row in rows:
                blobs.extend(await self._embed([row]))
            return blobs
        for (item_id, _), vec in zip(rows, np.asarray(matrix, dtype="<f4"), strict=True):
            if np.isfinite(vec).all():
                blobs.append((item_id, vec.tobytes()))
            else:  # PostgreSQL would refuse it, and the whole batch with it
                self.failed += 1
                log.warning("item %d: %s gave NaN or infinity; not stored", item_id, self.embedding.id)
        return blobs

    def _missing(self, limit: int) -> list[tuple[int, str]]:
        """Items past the watermark lacking a vector; a scan reads only ids it has not checked."""
        self.scans += 1
        embedder = self.embedding.id
        deleted: list[int] = []
        if isinstance(self.store, _Deletions):
            high, found = self.store.vector_deletions(embedder, self._log_seq or 0)
            deleted = found if self._log_seq is not None else []  # the first scan reads every id anyway
            self._log_seq = high
        with self.store.transaction(write=False) as tx:
            top = tx.max_item_id()
            rows = tx.missing_vectors(embedder, limit, after_id=self._watermark)
            edited = [i for i in deleted if i <= self._watermark]
            for start in range(0, len(edited), 500):
                rows += tx.missing_vectors(embedder, limit, ids=edited[start : start + 500])
            elsewhere = sorted(self.elsewhere)
            self.elsewhere.clear()  # still missing: queued again below, and claimed again
            for start in range(0, len(elsewhere), 500):
                rows += tx.missing_vectors(embedder, len(elsewhere), ids=elsewhere[start : start + 500])
        self._watermark = rows[-1][0] if len(rows) >= limit else max(self._watermark, top)
        return list({item: (item, text) for item, text in rows}.values())

    def _claim(self, ids: list[int]) -> tuple[list[int], list[int]]:
        """(the ids this process may embed: claimed now, or already its own; those another
        process is embedding). Ids given vectors meanwhile are in neither."""
        with self.store.transaction(write=True) as tx:
            if not isinstance(tx, _Claims):
                return ids, []  # a store without claims: nobody to share the work with
            claim = partial(tx.claim_vectors, self.embedding.id, ids, self.owner, lease_s=LEASE_S)
            mine, held = claim(now=time.time())
            if held and time.monotonic() >= self._next_reap:
                self._next_reap = time.monotonic() + REAP_EVERY_S
                dead = [owner for owner in tx.claim_owners() if _gone_here(owner)]
                if dead:
                    tx.drop_claims_of(dead)
                    mine, held = claim(now=time.time())
            return mine, held

    def _release_mine(self) -> None:
        """Drop this backfill's claims (it stops: what it had claimed is anyone's at once)."""
        _LIVE.discard(self.owner)
        try:
            with self.store.transaction(write=True) as tx:
                if isinstance(tx, _Claims):
                    tx.drop_claims_of([self.owner])
        except MemhubError as exc:  # a store already closed: the lease runs out instead
            log.warning("claims not released at stop: %s", exc.message)

    def _store_vectors(self, blobs: list[tuple[int, bytes]], claimed: Sequence[int] = ()) -> int:
        """Store a batch in one transaction and release its claims (`claimed`: the batch's
        items, embedded or failed); an item deleted while it was being embedded is skipped by
        the store (not an error), so the count may be lower than the batch."""
        embedder_id, dim = self.embedding.id, self.embedding.dim
        with self.store.transaction(write=True) as tx:
            stored: int = sum(tx.put_vector(item_id, embedder_id, blob, dim) for item_id, blob in blobs)
            if isinstance(tx, _Claims):
                tx.release_claims(embedder_id, claimed or [item for item, _ in blobs])
            return stored

    def _data_version(self) -> int | None:
        return self.store.data_version() if isinstance(self.store, ChangeProbe) else None

    async def run_forever(
        self,
        poll_seconds: float = 0.5,
        *,
        max_poll_seconds: float = 10.0,
        rescan_seconds: float = 10.0,
        full_rescan_seconds: float = 300.0,
        batch: int = 64,
    ) -> None:
        """Backfill until cancelled; returns if the embedder cannot be loaded.

        With work waiting it goes on at once; idle, it sleeps `poll_seconds`, doubling up to
        `max_poll_seconds` (`notify()` cuts a sleep short). A write signal (notify, another
        process's commit) also drops the prefetched rows, so edited texts are read afresh.
        """
        self._begun = True
        try:
            await self.embedding.load()
        except EmbedderUnavailable as exc:
            log.warning("vector backfill not started: %s", exc.message)
            return
        self._running = True
        if self._started is not None:
            self._started.set()
        try:
            await self._follow(poll_seconds, max_poll_seconds, rescan_seconds, full_rescan_seconds, batch)
        finally:
            self._running = False
            self._mark_settled()  # nobody waits for a backfill that stopped
            with anyio.CancelScope(shield=True), anyio.move_on_after(RELEASE_S):
                await anyio.to_thread.run_sync(self._release_mine, abandon_on_cancel=True)

    async def _follow(
        self,
        poll_seconds: float,
        max_poll_seconds: float,
        rescan_seconds: float,
        full_rescan_seconds: float,
        batch: int,
    ) -> None:
        idle = poll_seconds
        last_scan = -math.inf
        last_full = anyio.current_time()
        last_version: int | None = None
        worked = False  # embedded something since the heap was last trimmed
        while True:
            self._wake = anyio.Event()
            version = await anyio.to_thread.run_sync(self._data_version)
            waiting = bool(self.elsewhere) and not self._queue and not self._more  # on other processes
            changed = self._notified or waiting or (version is not None and version != last_version)
            if anyio.current_time() - last_full >= full_rescan_seconds:
                self._watermark = 0  # a safety net: items whose text changed after their id was checked
                last_full = anyio.current_time()
            if changed or anyio.current_time() - last_scan >= rescan_seconds:
                self._drop_queue()
                self._notified = False
                self._scan_generation = self._written  # the scan below sees every write up to here
                last_version, last_scan = version, anyio.current_time()
                rescan = True
            else:
                rescan = False
            done, failed = 0, False
            if rescan or self._queue or self._more:
                try:
                    done = await self.run_once(batch, batches=PIPELINE)
                except EmbedderUnavailable as exc:
                    log.warning("vector backfill stopped: %s", exc.message)
                    return
                except MemhubError as exc:
                    failed = True  # what it took is read again: nothing is settled by this round
                    log.warning("vector backfill failed (%s): %s; retrying", exc.kind, exc.message)
            if (rescan or done) and not failed and not self._queue and not self._more and not self.elsewhere:
                self._mark_settled(self._scan_generation)  # written before the last scan: embedded
            if done and (self._queue or self._more):
                idle = poll_seconds
                await anyio.sleep(0)  # more work is waiting: let others run, then go on at once
                continue
            if done:
                worked = True
            else:
                dropped = self.embedding.trim()  # nothing to index: the indexer's model is not kept
                if worked or dropped:  # the batches' temporaries (core/memory.py)
                    worked = False
                    await anyio.to_thread.run_sync(release_free_memory)
            wait = poll_seconds if done or self.elsewhere else idle
            idle = poll_seconds if done or self.elsewhere else min(max_poll_seconds, idle * 2)
            with anyio.move_on_after(wait):
                await self._wake.wait()
