"""State that several memhub processes sharing one store must agree on, at the store level:
rate-limit buckets (services/ratelimit.py over `SharedBuckets`) and the claims that make one
process embed each missing vector (search/backfill.py over `vector_claims`). Each test opens
the store more than once: each `Store` object is another process, in effect."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memhub.services.ratelimit import Limit, RateLimiter, SharedBuckets
from memhub.store.base import NewItem, Store
from memhub.store.open import open_store
from tests.store.backends import Backend
from tests.store.contract import TickClock


@pytest.fixture
def stores(tmp_path: Path, backend: Backend) -> Iterator[list[Store]]:
    url = backend.url(tmp_path)
    opened = [open_store(url, clock=TickClock()) for _ in range(2)]
    yield opened
    for store in opened:
        store.close()


def _limiter(store: Store, calls: int, clock: list[float], namespace: str = "principal") -> RateLimiter:
    assert isinstance(store, SharedBuckets)
    return RateLimiter({"read": Limit(calls)}, lambda: clock[0], shared=store, namespace=namespace)


def test_a_limit_is_shared_by_every_process_of_a_store(stores: list[Store]) -> None:
    clock = [1_000.0]
    one, two = (_limiter(s, 40, clock) for s in stores)
    allowed = sum(limiter.take("alice", "read").allowed for _ in range(25) for limiter in (one, two))
    assert allowed == 40  # not 40 per process
    refused = two.take("alice", "read")
    assert not refused.allowed and refused.retry_after_s == pytest.approx(1.5)  # 40 a minute: one per 1.5 s
    assert one.peek("alice", "read").remaining == 0
    assert one.take("bob", "read").allowed  # another principal's bucket
    assert _limiter(stores[0], 40, clock, "ip").take("alice", "read").allowed  # another limiter's
    clock[0] += 15.0  # refilled at 40 a minute: 10 more calls
    assert sum(one.take("alice", "read").allowed for _ in range(12)) == 10


def test_concurrent_calls_through_two_processes_are_each_counted_once(stores: list[Store]) -> None:
    clock = [5_000.0]
    limiters = [_limiter(s, 100, clock) for s in stores]
    granted: list[bool] = []

    def spend(limiter: RateLimiter) -> None:
        for _ in range(40):
            granted.append(limiter.take("carol", "read").allowed)

    threads = [threading.Thread(target=spend, args=(limiters[i % 2],)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(granted) == 240 and sum(granted) == 100


def test_a_refilled_bucket_is_purged_and_starts_full(stores: list[Store]) -> None:
    store = stores[0]
    assert isinstance(store, SharedBuckets)
    assert store.take_token("k", "read", 3.0, 0.05, 100.0) == (2.0, True)
    assert store.peek_tokens("k", "read") == (2.0, 100.0)
    assert store.purge_buckets(99.0) == 0
    assert store.purge_buckets(200.0) == 1
    assert store.peek_tokens("k", "read") is None


def _items(store: Store, n: int) -> list[int]:
    with store.transaction(write=True) as tx:
        tx.ensure_principal("alice")
        return [
            tx.insert_item(
                NewItem(kind="memory", owner="alice", scope="user", title=None, body=f"text {i}")
            ).id
            for i in range(n)
        ]


def test_an_item_is_claimed_by_one_process_until_its_lease_ends(stores: list[Store]) -> None:
    ids = _items(stores[0], 4)
    with stores[0].transaction(write=True) as tx:
        assert tx.claim_vectors("e", ids[:3], "one", now=10.0, lease_s=60.0) == (ids[:3], [])
    with stores[1].transaction(write=True) as tx:
        assert tx.claim_vectors("e", ids, "two", now=20.0, lease_s=60.0) == (ids[3:], ids[:3])
        assert tx.claim_vectors("e", ids, "two", now=20.0, lease_s=60.0) == (
            ids[3:],
            ids[:3],
        )  # its own again
    with stores[1].transaction(write=True) as tx:
        tx.release_claims("e", ids[:1])  # ids[0] was given up on
        assert tx.claim_vectors("e", ids[:2], "two", now=30.0, lease_s=60.0) == (ids[:1], ids[1:2])
        assert tx.claim_vectors("e", ids[:3], "two", now=71.0, lease_s=60.0) == (ids[:3], [])  # lease over
        assert tx.claim_vectors("other", ids[:1], "two", now=71.0, lease_s=60.0) == (
            ids[:1],
            [],
        )  # per embedder


def test_an_item_whose_vector_is_stored_is_claimed_by_nobody(stores: list[Store]) -> None:
    ids = _items(stores[0], 2)
    with stores[0].transaction(write=True) as tx:
        assert tx.put_vector(ids[0], "e", bytes(32), 8)
        tx.release_claims("e", ids[:1])
    with stores[1].transaction(write=True) as tx:  # read as missing before the vector was stored
        assert tx.claim_vectors("e", ids, "two", now=10.0, lease_s=60.0) == (ids[1:], [])


def test_a_limiter_counts_in_its_own_bucket_while_the_store_cannot(
    stores: list[Store], backend: Backend
) -> None:
    store = stores[1]
    if backend.name == "sqlite":
        Path(store.location + ".limits").mkdir()  # the bucket file cannot be opened
    else:
        store.close()  # the pool is gone
    clock = [1_000.0]
    limiter = _limiter(store, 3, clock)
    assert [limiter.take("dave", "read").allowed for _ in range(4)] == [True, True, True, False]
    assert not limiter.peek("dave", "read").allowed
