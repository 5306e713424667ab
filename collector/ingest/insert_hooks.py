"""The writer's hooks as the collector runs them, in the order that matters (``collector.ingest.hooks``).

Engine spans are joined to their client spans before the store hears of a backlog (its merges held);
after it, freshness, the totals a crash left behind and the heads of live runs; once the batch is
released, the merges resume (the queue drained) and the C heap is trimmed, last.
"""

from __future__ import annotations

from collections.abc import Callable

from agentwatch_platform.collector.ingest.backlog import BacklogHook
from agentwatch_platform.collector.ingest.engine_join import EngineJoin, EngineJoinHook
from agentwatch_platform.collector.ingest.freshness import Freshness
from agentwatch_platform.collector.ingest.heap import HeapTrim
from agentwatch_platform.collector.ingest.hooks import InsertHook
from agentwatch_platform.collector.ingest.live_runs import LiveRuns, LiveRunsHook
from agentwatch_platform.collector.ingest.normalize import Pricer
from agentwatch_platform.collector.ingest.totals_repair import TotalsRepair
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage.base import Store


def insert_hooks(
    settings: Settings,
    store: Callable[[], Store],
    *,
    pricer: Pricer,
    may_bill: Callable[[], bool],
    freshness: Freshness,
    clock: Callable[[], float],
) -> list[InsertHook]:
    """``may_bill``: whether this collector holds the engine-join role (``collector.roles``)."""
    join = EngineJoin(wait_s=settings.engine_join_wait_s, pricer=pricer, clock=clock)
    return [
        EngineJoinHook(join, store, may_bill=may_bill),
        BacklogHook(store),
        freshness,
        TotalsRepair(store),
        LiveRunsHook(LiveRuns(), store),
        HeapTrim(),
    ]
