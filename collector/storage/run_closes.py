"""The run closer: the totals of the runs that started in each minute, kept in ``closed_run_minutes``.

An overview's per-run figures (steps per run, the largest run's steps and cost) need each run's
totals, and merging every run of a day by trace cost ~1 s of CPU at 100M spans. A run's totals
change as long as its spans arrive, late ones included, so they cannot be written once when its
root comes without a look-up per batch (over the ingest budget, bench/results/scale_100m.md).
Instead a pass, run once per cluster (``RunCloser``, in the collector holding the ``run-closer``
role of ``collector.roles``), recomputes the minutes whose runs changed since its last mark, from
``runs_agg``, and then moves the mark; queries trust a minute's row only where no run of it
changed since the mark (``sql.closes``), so figures stay exact whether or not the closer
keeps up.

The first pass after an upgrade closes every stored run (the backfill), a day of runs at a time
(one statement each), so that its memory is a day's runs whatever the store holds (30 days of 1M
spans: +86-93 MB against +258 MB at once, in 1.8x the time; bench/results/scale.md); queries merge
runs as before until it has marked. A failed pass is logged and the next one redoes its work: its
mark is written last.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable, Iterator

from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.sql import closes as closes_sql

log = logging.getLogger(__name__)

# A pass marks the server's time less this margin: an insert's runs_agg rows carry its start
# (``inserted``), and one still running when a pass reads must have started after its mark.
CLOSE_MARGIN_S = 60
_DAY_S = 86_400


def close_runs(store: Store, *, margin_s: int = CLOSE_MARGIN_S) -> int:
    """One pass: rewrite every minute a run changed in since the last mark, then mark. Returns how
    many minute rows were written (every minute with runs on the first pass: the backfill).

    ``margin_s`` -1 marks the next second: what tests use to close rows they just inserted (and
    then wait for that second before inserting more)."""
    closed_to = int(store.query(closes_sql.SERVER_NOW)[0]["now"]) - margin_s
    last = int(store.query(closes_sql.CLOSED_TO)[0]["closed_to"] or 0)
    if closed_to <= last:
        return 0
    written = 0
    for day in store.query(closes_sql.DAYS_SINCE, {"closed_to": last}):
        # A day's stale runs at a time: a run across midnight is stale in both days, so its
        # minutes are written twice in this pass, with the same totals.
        params = {"closed_to": last, "day": int(day["day"]), "first_hour": int(day["first_hour"])}
        stale = store.query(closes_sql.STALE_MINUTES_BY_PROJECT, params)
        for row in stale:
            for minutes in _by_day(row["minutes"]):  # bounds each merge to about a day of runs
                store.command(
                    closes_sql.CLOSE_MINUTES, {"project": row["project"], "minutes": minutes, "closed_to": closed_to}
                )
                written += len(minutes)
    store.command(closes_sql.RECORD_MARK, {"closed_to": closed_to})
    return written


def _by_day(minutes: list[int]) -> Iterator[list[int]]:
    for _, day in itertools.groupby(sorted(int(m) for m in minutes), key=lambda m: m // _DAY_S):
        yield list(day)


# Runs changed since the last pass are merged by each overview until the next one: a pass every
# half minute keeps them to the last minute or two of traffic (a pass costs tens of ms at 100M spans).
CLOSE_EVERY_S = 30.0


class RunCloser:
    """Runs a pass at start and every ``every_s`` while ``may_close()``; an async context manager."""

    def __init__(
        self, store: Callable[[], Store], *, may_close: Callable[[], bool], every_s: float = CLOSE_EVERY_S
    ) -> None:
        self._store, self._may_close, self.every_s = store, may_close, every_s
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def close_once(self) -> None:
        """One pass (from a worker thread); a store error waits for the next one."""
        if not self._may_close():
            return
        try:
            minutes = close_runs(self._store())
        except StoreError as exc:
            log.warning("run closer: pass failed (%s); retried in %.0f s", exc, self.every_s)
            return
        if minutes:
            log.debug("run closer: %d minutes closed", minutes)

    async def __aenter__(self) -> RunCloser:
        self._task = asyncio.create_task(self._loop(), name="agentwatch-run-closer")
        return self

    async def _loop(self) -> None:
        while not self._stop.is_set():
            await asyncio.to_thread(self.close_once)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.every_s)

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._stop.set()
            await self._task
            self._task = None
