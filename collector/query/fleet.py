"""Counters of all the collectors that share a store, for ``/api/ingest``.

Behind a load balancer, ``/api/ingest`` is answered by whichever collector the request reaches,
and each counts only what it received. Where collectors share a ClickHouse, each writes its
cumulative received/rejected counts per project to ``collector_counters`` every
``interval_s`` (and once more at shutdown), and ``/api/ingest`` adds the other collectors' last
counts to its own live ones. ``/metrics`` stays per collector (Prometheus sums them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from agentwatch_platform.collector.metrics import Metrics
from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.sql import fleet as fleet_sql

log = logging.getLogger(__name__)


class FleetCounters:
    """Publishes this collector's counters and reads the others'; an async context manager."""

    def __init__(self, store: Callable[[], Store], metrics: Metrics, holder: str, *, interval_s: float = 5.0) -> None:
        self._store, self._metrics, self.holder, self.interval_s = store, metrics, holder, interval_s
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def publish(self) -> None:
        """Write this collector's counts now (from a worker thread); a store error waits for the next time."""
        rows = {"": (self._metrics.totals["received"], self._metrics.totals["rejected"])}
        rows.update({p: (c["received"], c["rejected"]) for p, c in self._metrics.by_project.items()})
        params = {
            "collector": self.holder,
            "projects": list(rows),
            "received": [r for r, _ in rows.values()],
            "rejected": [j for _, j in rows.values()],
        }
        try:
            self._store().command(fleet_sql.WRITE_COUNTERS, params)
        except StoreError as exc:
            log.warning("fleet counters: publishing failed (%s); retried in %.0f s", exc, self.interval_s)

    def others(self, project: str = "") -> tuple[int, int]:
        """(received, rejected) of the other collectors for ``project`` ('' = every project); (0, 0) if the store is away."""
        try:
            rows = self._store().query(fleet_sql.OTHERS_COUNTERS, {"project": project, "collector": self.holder})
        except StoreError as exc:
            log.warning("fleet counters: reading the other collectors' failed: %s", exc)
            return 0, 0
        return (int(rows[0]["received"]), int(rows[0]["rejected"])) if rows else (0, 0)

    async def __aenter__(self) -> FleetCounters:
        self._task = asyncio.create_task(self._loop(), name="agentwatch-fleet-counters")
        return self

    async def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.interval_s)
            await asyncio.to_thread(self.publish)

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._stop.set()
            await self._task  # its last round publishes the final counts
            self._task = None
