"""Work done once per cluster, however many collectors share the store.

Alert evaluation, engine scraping, the engine-join billing pass and the run closer read the whole
store and write incidents, samples, bills and closed runs: run by every collector behind a load
balancer, they would notify twice, scrape twice, bill twice and close every run twice. Each is a *role*, held through a lease in the store
(``collector.storage.lease``): a background task takes or renews every role's lease each third
of ``AGENTWATCH_LEASE_TTL_S``, and a component asks ``holds(role)`` (no store round trip) before
each round. A collector that dies stops renewing; another takes its roles within one TTL, and
picks up from the store (alert incidents and their deliveries are stored, so nothing is sent
twice). With embedded chDB the collector owns its store alone and holds every role.

Live-run heads are not a role: each collector opens them for the batches it inserts, and a
second opening head of a trace changes no figure (``collector.ingest.live_runs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.lease import StoreLease

log = logging.getLogger(__name__)

ALERTS = "alerts"
ENGINE_SCRAPER = "engine-scraper"
ENGINE_JOIN = "engine-join"
RUN_CLOSER = "run-closer"
RETENTION = "retention"  # the hourly retention pass (collector.storage.maintenance)
ROLES = (ALERTS, ENGINE_SCRAPER, ENGINE_JOIN, RUN_CLOSER, RETENTION)


class Roles:
    """The roles this collector holds now; an async context manager that keeps them renewed.

    ``shared`` False (embedded chDB, a store of its own): every role is held, nothing runs.
    """

    def __init__(
        self,
        store: Callable[[], Store],
        holder: str,
        *,
        ttl_s: float = 15.0,
        shared: bool = True,
        roles: tuple[str, ...] = ROLES,
    ) -> None:
        self._store, self.holder, self.ttl_s, self.shared = store, holder, ttl_s, shared
        self._leases: dict[str, StoreLease] = {}
        self._roles = roles
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def holds(self, role: str) -> bool:
        """Whether this collector should do ``role``'s work now."""
        if not self.shared:
            return True
        lease = self._leases.get(role)
        return lease is not None and lease.held

    def held(self) -> list[str]:
        return [role for role in self._roles if self.holds(role)]

    def renew(self) -> None:
        """Take or renew every role's lease once (from a worker thread); a store error drops none
        held (they expire on their own) and is retried next time."""
        for role in self._roles:
            try:
                store = self._store()
                lease = self._leases.get(role)
                if lease is None or lease.store is not store:
                    lease = self._leases[role] = StoreLease(store, role, self.holder, ttl_s=self.ttl_s)
                was = lease.held
                if lease.acquire() != was:
                    log.info("roles: %s %s %s", self.holder, "took" if lease.held else "lost", role)
            except StoreError as exc:
                log.warning("roles: renewing %s failed (%s); retried in %.1f s", role, exc, self.ttl_s / 3)

    async def __aenter__(self) -> Roles:
        if self.shared:
            await asyncio.to_thread(self.renew)
            self._task = asyncio.create_task(self._loop(), name="agentwatch-roles")
        return self

    async def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.ttl_s / 3)
            if not self._stop.is_set():
                await asyncio.to_thread(self.renew)

    async def __aexit__(self, *exc: object) -> None:
        """Stop renewing and hand the roles back, so another collector takes them at once."""
        if self._task is None:
            return
        self._stop.set()
        await self._task
        self._task = None
        await asyncio.to_thread(self._release)

    def _release(self) -> None:
        for lease in self._leases.values():
            lease.release()
