"""Leases in the store (``collector.storage.lease``): one holder per term, taken over after expiry,
and span batches from several collectors' stores stored exactly once under the span-writer lease.
(The lease tests share a store per back end; each uses lease names of its own.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from agentwatch_platform.collector.storage.base import Store, StoreUnavailable
from agentwatch_platform.collector.storage.clickhouse_store import ClickHouseStore
from agentwatch_platform.collector.storage.lease import SPAN_WRITER, SpanWriteLock, StoreLease
from tests.collector.factories import agent_run
from tests.collector.store_fixtures import _drop, scratch_database
from tests.collector.test_store import totals
from tests.support.poll import wait_until

TTL_S = 3.0  # the span-writer lease's TTL in the test of slow look-ups


def test_one_holder_at_a_time_and_a_hand_back_frees_it(module_store: Store) -> None:
    store = module_store
    a, b = StoreLease(store, "alerts", "a"), StoreLease(store, "alerts", "b")
    assert a.acquire() and a.held
    assert not b.acquire() and not b.held
    term = a.term
    assert a.acquire() and a.term == term + 1  # renewed by a new term
    a.release()
    assert not a.held
    assert b.acquire() and b.held
    assert StoreLease(store, "scraper", "a").acquire()  # another name is another lease


def test_an_expired_lease_is_taken_over(module_store: Store) -> None:
    store = module_store
    dead = StoreLease(store, "evaluator", "dead", ttl_s=3.0)  # long enough for the heir's first try on a loaded machine
    assert dead.acquire()
    heir = StoreLease(store, "evaluator", "heir")
    assert not heir.acquire()
    wait_until(heir.acquire, 60, "the heir never took the lease its holder stopped renewing", interval=0.2)
    assert not dead.acquire()


@pytest.mark.slow  # a look-up held past the lease (make test runs it, make quick not)
def test_a_slow_look_up_renews_the_lease_before_the_insert_and_an_overrun_is_counted(module_store: Store) -> None:
    """Seen under load: a look-up and insert slower than the TTL let another collector take the
    span-writer lease mid-insert and store a redelivered batch twice. The writer renews between
    the two when a third of the TTL is gone, gives the batch up if the lease was taken, and counts
    an insert that outlasted it."""
    store = module_store
    # The sleeps are the slow look-ups and inserts under test. A third of the TTL (1 s) outlasts
    # what a loaded machine takes between two statements here.
    lock = SpanWriteLock(store, "writer-a", ttl_s=TTL_S)
    with lock.hold():
        term = lock._lease.term
        lock.refresh()
        assert lock._lease.term == term  # fresh: nothing to renew
        time.sleep(TTL_S / 3 + 0.1)  # a slow look-up: more than a third of the TTL
        lock.refresh()
        assert lock._lease.term == term + 1 and lock._lease.surely_ours
        assert not lock.overran() and lock.overruns == 0
        time.sleep(TTL_S + 0.1)  # an insert longer than the TTL
        assert lock.overran() and lock.overruns == 1
    other = SpanWriteLock(store, "writer-b", ttl_s=TTL_S)
    with lock.hold():
        time.sleep(TTL_S + 0.1)  # the look-up outlasted the lease; another collector took it
        assert other._lease.acquire()
        with pytest.raises(StoreUnavailable, match="another collector took it"):
            lock.refresh()
    other._lease.release()


def test_contenders_for_one_term_get_one_winner(module_store: Store) -> None:
    store = module_store
    """Every contender writes the same term; the store keeps one row, so exactly one wins."""
    leases = [StoreLease(store, "race", f"h{i}") for i in range(6)]
    latest = None
    for lease in leases:  # all read "free" before any writes, as concurrent contenders would
        latest = lease._latest()
    assert latest is None
    for lease in leases:
        lease._write(1, lease.holder, 15)
    winner = leases[0]._term(1)
    assert winner is not None and winner.holder == "h0"
    assert len(store.query("SELECT holder FROM leases WHERE name = 'race'")) == 1


@pytest.fixture
def two_collectors_stores(clickhouse_url: str) -> Iterator[tuple[ClickHouseStore, ClickHouseStore]]:
    url = scratch_database(clickhouse_url)
    first = ClickHouseStore(url, holder="c1")
    first.migrate()
    second = ClickHouseStore(url, holder="c2")
    yield first, second
    second.close()
    _drop(first)


def test_the_same_spans_written_by_two_collectors_at_once_are_stored_once(
    two_collectors_stores: tuple[ClickHouseStore, ClickHouseStore],
) -> None:
    first, second = two_collectors_stores
    runs = [agent_run(start_s=time.time() - 600 + i, steps=4) for i in range(12)]
    rows = [span for run in runs for span in run]
    written: list[int] = []
    sent: list[int] = []

    def send(store: ClickHouseStore, batches: list[list]) -> None:
        """Each batch until it is stored, as the spool retries one that found the lease busy past
        its wait: on a loaded machine one collector can hold the lease across many inserts."""
        for batch in batches:
            while True:
                try:
                    written.append(store.insert_spans(batch))
                    break
                except StoreUnavailable:
                    continue
            sent.append(len(batch))

    # Both collectors get every run (a retry on the other collector), in other groupings and orders.
    threads = [
        threading.Thread(target=send, args=(first, [rows[i : i + 10] for i in range(0, len(rows), 10)])),
        threading.Thread(target=send, args=(second, [rows[::-1][i : i + 7] for i in range(0, len(rows), 7)])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(sent) == 2 * len(rows)  # both collectors got through every batch
    assert sum(written) == len(rows)
    stored = first.query("SELECT count() AS n, uniqExact(trace_id, span_id) AS keys FROM spans")[0]
    assert stored == {"n": len(rows), "keys": len(rows)}
    assert totals(first)[0]["spans"] == len(rows)
    assert first.query("SELECT sum(llm_calls) AS n FROM runs_agg")[0]["n"] == sum(1 for r in rows if r.kind == "llm")


def test_a_writer_waits_for_the_lease_then_gives_up_with_store_unavailable(
    two_collectors_stores: tuple[ClickHouseStore, ClickHouseStore],
) -> None:
    first, second = two_collectors_stores
    other = StoreLease(first, SPAN_WRITER, "stuck-collector")
    assert other.acquire()
    lock = SpanWriteLock(second, "c2", wait_s=0.2)
    with pytest.raises(StoreUnavailable, match="span-writer lease"):
        with lock.hold():
            pass
    assert lock.waits > 0
    other.release()
    with lock.hold():
        pass


def test_each_role_is_held_by_one_collector_and_handed_over_at_shutdown(
    two_collectors_stores: tuple[ClickHouseStore, ClickHouseStore],
) -> None:
    import asyncio

    from agentwatch_platform.collector.roles import ROLES, Roles

    first, second = two_collectors_stores
    one, two = Roles(lambda: first, "c1"), Roles(lambda: second, "c2")

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        async with one:
            await asyncio.to_thread(two.renew)
            during = (one.held(), two.held())
        await asyncio.to_thread(two.renew)
        return *during, two.held()

    held_one, held_two, after = asyncio.run(scenario())
    assert held_one == list(ROLES) and held_two == []
    assert after == list(ROLES)
    assert Roles(lambda: first, "solo", shared=False).holds("alerts")


def test_a_term_taken_by_another_is_never_won_by_a_late_contender(module_store: Store) -> None:
    store = module_store
    a, b = StoreLease(store, "writer", "a"), StoreLease(store, "writer", "b")
    assert a.acquire()
    a.release()  # a will first try the term after its hand-back
    assert b.acquire()
    assert not a.acquire() and b.held
    stale = StoreLease(store, "writer", "stale")
    store.command(
        "INSERT INTO leases (name, term, holder, expires_at, taken_at) SELECT 'writer', 1, 'stale', now64(3) + 60, now64(3)"
    )
    assert not stale._try(1), "a later term exists: an old term's row (its token forgotten) wins nothing"
