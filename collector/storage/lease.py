"""Leases in the store: what lets many collectors share one ClickHouse without doing work twice.

A lease is a name (``span-writer``, ``alerts``, ...) held by one collector until an expiry the
server's clock sets. Taking or renewing it writes the next *term* of the name; the store keeps
exactly one row per term (``sql.lease``: insert deduplication decides, atomically on one
server and through Keeper on a cluster) and reading the term back tells each contender whether
it won. A holder that dies stops renewing, and its lease is taken over once it expires.

Three uses:

- ``SpanWriteLock``: the identity check and the insert of a span batch run under the
  ``span-writer`` lease, taken per batch and handed back after it. So a request retried on
  another collector finds its spans stored (or is stored by exactly one of the two): the
  look-up-then-insert is atomic across collectors, as the insert lock makes it within one.
- ``SCHEMA``: one collector at a time applies migrations (``SqlStore.migrate``), so a cluster
  applies each once however many collectors start together.
- ``collector.roles``: work that must run once per cluster (alert evaluation, engine scraping,
  the engine-join billing pass) runs only in the collector holding that role's lease.

The expiry must outlast the work done under the lease: a batch insert that takes longer than
``ttl_s`` could overlap the next holder's. ``AGENTWATCH_LEASE_TTL_S`` (15 s) is far above a
batch insert (well under a second for 160k spans on the machines measured). The span writer
renews the lease between its look-up and its insert when a third of the TTL is gone (a slow
look-up no longer eats the insert's time), and counts an insert that outlasted the lease
(``LeaseLock.overruns``, logged): the one case where a batch could be stored twice. The
ClickHouse store does no fencing beyond this; there are no transactions to fence with.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agentwatch_platform.collector.storage.base import StoreError, StoreUnavailable
from agentwatch_platform.collector.storage.sql import lease as lease_sql

log = logging.getLogger(__name__)

SPAN_WRITER = "span-writer"
SCHEMA = "schema"  # held while migrations are applied: once per cluster, by one collector
_FORGET_EVERY = 1000  # terms; the holder then drops all but the last ones


def holder_id(name: str = "") -> str:
    """A holder name unique to this process: ``name`` (or host-pid) and a random suffix."""
    return f"{name or f'{socket.gethostname()}-{os.getpid()}'}/{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Term:
    term: int
    holder: str
    expires_ms: int
    now_ms: int  # the server's clock when it was read

    @property
    def live(self) -> bool:
        return self.expires_ms > self.now_ms


class StoreLease:
    """One named lease, as one holder sees it. Not thread-safe: one user per instance."""

    def __init__(self, store: Any, name: str, holder: str, *, ttl_s: float = 15.0) -> None:
        self.store, self.name, self.holder, self.ttl_s = store, name, holder, ttl_s
        self.term = 0  # the term this holder holds, 0 when none
        self._until = 0.0  # monotonic time before which the held term is surely live
        self._guess = 0  # the term after our hand-back: tried first, without reading the latest
        self._expires = 0.0  # monotonic time before which no other holder can have taken it
        self._fresh_until = 0.0  # ...and before which at least two thirds of its TTL are left

    @property
    def held(self) -> bool:
        """Held, with at least a third of the TTL left (by this process's clock, started before the insert)."""
        return self.term > 0 and time.monotonic() < self._until

    def acquire(self) -> bool:
        """Take the lease if it is free or expired, renew it if it is ours; whether it is held now.

        After a hand-back the next term is tried at once (a lease passed back and forth between
        batches costs two statements to take, not three); if someone else took it, the latest
        term is read and the usual rules apply.
        """
        guess, self._guess = self._guess, 0
        if guess and self._try(guess):
            return True
        latest = self._latest()
        if latest is not None and latest.live and latest.holder != self.holder:
            self.term = 0
            return False
        return self._try((latest.term if latest else 0) + 1)

    def _try(self, term: int) -> bool:
        """Write ``term`` as ours; held if the store kept our row and no later term exists."""
        started = time.monotonic()
        self._write(term, self.holder, self.ttl_s)
        rows = self.store.query(lease_sql.TERMS_FROM, {"name": self.name, "term": term})
        if len(rows) != 1 or int(rows[0]["term"]) != term or rows[0]["holder"] != self.holder:
            self.term = 0
            return False
        self.term, self._until, self._expires = term, started + self.ttl_s * 2 / 3, started + self.ttl_s
        self._fresh_until = started + self.ttl_s / 3
        if term % _FORGET_EVERY == 0:
            self._forget(term)
        return True

    @property
    def fresh(self) -> bool:
        """Held with at least two thirds of the TTL left."""
        return self.term > 0 and time.monotonic() < self._fresh_until

    @property
    def surely_ours(self) -> bool:
        """No other holder can have taken it yet: our term's expiry has not passed (this
        process's clock started before the term was written, so it errs early)."""
        return self.term > 0 and time.monotonic() < self._expires

    def release(self) -> None:
        """Hand the lease back (a term already over), so another holder need not wait for the expiry."""
        if not self.term:
            return
        term, self.term = self.term + 1, 0
        self._guess = term + 1
        try:
            self._write(term, "", 0)
        except StoreError as exc:  # it expires anyway
            log.warning("lease %s: hand-back failed (%s); it expires in %.0f s", self.name, exc, self.ttl_s)

    def _latest(self) -> Term | None:
        rows = self.store.query(lease_sql.LATEST_TERM, {"name": self.name})
        return (
            Term(int(rows[0]["term"]), rows[0]["holder"], int(rows[0]["expires_ms"]), int(rows[0]["now_ms"]))
            if rows
            else None
        )

    def _term(self, term: int) -> Term | None:
        rows = self.store.query(lease_sql.TERMS_FROM, {"name": self.name, "term": term})
        return (
            Term(term, rows[0]["holder"], int(rows[0]["expires_ms"]), int(rows[0]["now_ms"]))
            if rows and int(rows[0]["term"]) == term
            else None
        )

    def _write(self, term: int, holder: str, ttl_s: float) -> None:
        params = {
            "name": self.name,
            "term": term,
            "holder": holder,
            "ttl_ms": int(ttl_s * 1000),
            "token": f"lease:{self.name}:{term}",
        }
        self.store.command(lease_sql.TAKE_TERM, params)

    def _forget(self, term: int) -> None:
        try:
            self.store.command(lease_sql.FORGET_TERMS, {"name": self.name, "below": term - 100})
        except StoreError as exc:
            log.warning("lease %s: dropping old terms failed: %s", self.name, exc)


class LeaseLock:
    """A lease used as a lock: ``with lock.hold(): ...`` takes it (waiting) and hands it back.

    ``hold()`` waits for the lease (polling, with backoff) at most ``wait_s``, then raises
    ``StoreUnavailable``: the writer retries the batch later and the spool keeps it.
    """

    def __init__(self, store: Any, name: str, holder: str, *, ttl_s: float = 15.0, wait_s: float | None = None) -> None:
        self._lease = StoreLease(store, name, holder, ttl_s=ttl_s)
        self.holder = holder
        self._wait_s = wait_s if wait_s is not None else 2 * ttl_s
        self._lock = threading.Lock()
        self.waits = 0  # batches that found the lease held by another collector
        self.overruns = 0  # holds whose work outlasted the lease (``overran``)

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._lock:
            self._take()
            try:
                yield
            finally:
                self._lease.release()

    def refresh(self) -> None:
        """Renew the lease if a third of its TTL is gone, so the work that follows (a batch
        insert after a slow look-up) has at least two thirds of a TTL before anyone else may
        take it. Raises ``StoreUnavailable`` when it was lost meanwhile: the caller's batch is
        retried later, look-up included (the spool keeps it)."""
        if self._lease.fresh:
            return
        if not self._lease.acquire():
            raise StoreUnavailable(
                f"the {self._lease.name} lease expired during a look-up and another collector took it"
            )

    def overran(self) -> bool:
        """Whether the work since the last take or renewal outlasted the lease: another
        collector may have taken it meanwhile (for span writes, a batch may then be stored
        twice). Counted in ``overruns`` and logged; raise AGENTWATCH_LEASE_TTL_S if it happens."""
        if self._lease.surely_ours:
            return False
        self.overruns += 1
        log.warning(
            "the %s lease (TTL %.0f s) expired before the work under it ended; another collector may have "
            "done the same work: raise AGENTWATCH_LEASE_TTL_S above the slowest batch insert",
            self._lease.name,
            self._lease.ttl_s,
        )
        return True

    def _take(self) -> None:
        deadline = time.monotonic() + self._wait_s
        pause = 0.005
        while not self._lease.acquire():
            self.waits += 1
            if time.monotonic() > deadline:
                raise StoreUnavailable(
                    f"the {self._lease.name} lease stayed with another collector for {self._wait_s:.0f} s"
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.1)


class SpanWriteLock(LeaseLock):
    """The ``span-writer`` lease around each identity check and insert; see the module docstring."""

    def __init__(self, store: Any, holder: str, *, ttl_s: float = 15.0, wait_s: float | None = None) -> None:
        super().__init__(store, SPAN_WRITER, holder, ttl_s=ttl_s, wait_s=wait_s)
