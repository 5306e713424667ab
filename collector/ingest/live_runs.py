"""A run is listed from its first span, not from its root's.

A run's root span ends last, so until then the run has no head (``runs_agg`` rows with
``roots > 0``, what lists runs without merging partials). After each insert, the writer hands
the batch here: every trace that has spans but no root yet gets one opening head
(``runs_agg.opened``, written by ``ingest_sql.OPEN_RUN_HEADS`` from the stored spans, so it holds
the earliest start, agent, session and user seen). The run is then listed as ``running`` while
spans keep arriving and ``incomplete`` once none arrived for ``AGENTWATCH_RUN_IDLE_TIMEOUT_S``;
its root, when it comes, makes it a finished run (the query merges the two heads per trace).
The agentwatch SDK sends a zero-length ``agentwatch.run.start`` span when a run starts, so its
runs are listed within an export interval of starting.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from agentwatch import semconv as sc

from agentwatch_platform.collector.ingest.hooks import Batch, InsertHook
from agentwatch_platform.collector.storage.base import Store, StoreError
from agentwatch_platform.collector.storage.sql import ingest as ingest_sql

log = logging.getLogger(__name__)

_CAPACITY = 200_000  # traces remembered as opened or rooted (a forgotten one costs a look-up)


class LiveRuns:
    """Opens heads for rootless traces; one per collector, used from the writer's thread."""

    def __init__(self, *, capacity: int = _CAPACITY) -> None:
        self._known: OrderedDict[str, None] = OrderedDict()  # "project/trace" opened or rooted
        self._capacity = capacity
        self.opened = 0

    def after_insert(self, store: Store, table: pa.Table) -> int:
        """Open heads for the batch's traces that have no root; returns how many traces were asked."""
        if not table.num_rows:
            return 0
        kinds = table.column("kind")
        keys = pc.binary_join_element_wise(table.column("project"), table.column("trace_id"), "/")
        root = pc.or_(
            pc.equal(kinds, sc.KIND_RUN),
            pc.and_(pc.equal(table.column("parent_span_id"), ""), pc.not_equal(kinds, sc.KIND_ENGINE)),
        )
        rooted = set(pc.unique(keys.filter(root)).to_pylist())
        agent_spans = pc.not_equal(kinds, sc.KIND_ENGINE)
        new = [k for k in pc.unique(keys.filter(agent_spans)).to_pylist() if k not in rooted and k not in self._known]
        self._remember(rooted)
        if not new:
            return 0
        lo_ns = pc.min(table.column("start_time").cast(pa.int64())).as_py()
        by_project: dict[str, list[str]] = {}
        for key in new:
            project, _, trace_id = key.rpartition("/")
            by_project.setdefault(project, []).append(trace_id)
        try:
            for project, trace_ids in by_project.items():
                store.command(
                    ingest_sql.OPEN_RUN_HEADS, {"project": project, "trace_ids": sorted(trace_ids), "lo_ns": lo_ns}
                )
        except StoreError as exc:  # the run is listed when its root comes; nothing is lost
            log.warning("live runs: opening heads for %d traces failed: %s", len(new), exc)
            return 0
        self._remember(new)
        self.opened += len(new)
        return len(new)

    def forget(self, project: str, trace_ids: list[str] | None) -> None:
        """Deleted traces (``None``: every trace of ``project``): a span of theirs arriving later opens a head again."""
        if trace_ids is None:
            prefix = f"{project}/"
            for key in [k for k in list(self._known) if k.startswith(prefix)]:
                self._known.pop(key, None)
            return
        for trace_id in trace_ids:
            self._known.pop(f"{project}/{trace_id}", None)

    def _remember(self, keys: set[str] | list[str]) -> None:
        known = self._known
        for key in keys:
            known[key] = None
            known.move_to_end(key)
        while len(known) > self._capacity:
            known.popitem(last=False)


class LiveRunsHook(InsertHook):
    """The writer's hook: after each insert, heads for the batch's rootless traces."""

    def __init__(self, live: LiveRuns, store: Callable[[], Store]) -> None:
        self.live = live
        self._store = store

    def after_insert(self, batch: Batch) -> None:
        try:
            self.live.after_insert(self._store(), batch.table)
        except StoreError as exc:
            log.warning("writer: opening runs skipped: %s", exc)

    def forget(self, project: str, trace_ids: list[str] | None) -> None:
        self.live.forget(project, trace_ids)
