"""Derived tables kept right: rebuild run totals and per-minute figures from the spans."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from agentwatch_platform.collector.storage import queries
from agentwatch_platform.collector.storage.base import Store


def rebuild_totals(store: Store, *, since: float, project: str = "") -> None:
    """Recompute the run totals and per-minute figures from the stored spans, from ``since`` on.

    Used after a re-price and after replaying a batch that a crash interrupted, when the
    spans may be stored without their share of the derived totals. Run it with no insert
    racing it: the writer calls it from its own loop, and where collectors share the store it
    holds the span-writer lease, so no other collector inserts meanwhile.
    """
    params: dict[str, Any] = {"since_ns": int(since * 1e9), "project": project}
    lock = getattr(store, "write_lock", None)  # other collectors' inserts wait (collector.storage.lease)
    with lock.hold() if lock is not None else nullcontext():
        for statement in (
            queries.DROP_RUN_MINUTES,
            queries.DROP_RUNS,
            queries.REBUILD_RUNS,
            queries.DROP_MINUTES,
            queries.DROP_HOURS,
            queries.REBUILD_MINUTES,
        ):
            store.command(statement, params)
