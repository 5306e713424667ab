"""An embedded store's merges held while a burst's backlog is inserted: when to hold, when to let go.

While a backlog waits behind the batch being inserted, the spans table's background merges wait
too (``ChdbStore.hold_merges``, ``sql.admin.HOLD_MERGES``): merging text-heavy parts during a burst's
inserts added 60-140 MB to its peak (bench/results/scale.md). For at most ``limit_s``
(``AGENTWATCH_CHDB_MERGE_HOLD_S``); after that limit, not again until the queue has drained once.
The store owns this (``Store.backlog``); ingest only says, per insert, whether a backlog waits
(``collector.ingest.backlog``).
"""

from __future__ import annotations

import time
from collections.abc import Callable


class MergeHold:
    """Calls ``hold(True)`` when the merges should wait, ``hold(False)`` when they should run again;
    only on a change. ``limit_s`` 0: they never wait."""

    def __init__(
        self, hold: Callable[[bool], None], *, limit_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._hold = hold
        self._limit_s = limit_s
        self._clock = clock
        self._held_since: float | None = None  # when the merges were held
        self._may_hold = True  # False after a hold reached its limit, until the queue drains

    def backlog(self, waiting: bool) -> None:
        """Whether a backlog waits behind the batch being inserted (False also: the queue drained)."""
        now = self._clock()
        if not waiting:
            self._may_hold = True
        elif self._held_since is not None and now - self._held_since >= self._limit_s:
            self._may_hold = False
        hold = waiting and self._may_hold and self._limit_s > 0
        if hold == (self._held_since is not None):
            return
        self._held_since = now if hold else None
        self._hold(hold)
