"""What the writer does around an insert besides inserting: the hooks it is given.

The writer batches spans and writes them; everything "after an insert, also do X" is an
``InsertHook`` handed to it, like OpenTelemetry's span processors: engine spans joined to their
client spans (``collector.ingest.engine_join``), runs listed from their first span
(``collector.ingest.live_runs``), run totals rebuilt after a crash (``collector.ingest.totals_repair``),
the store told of a burst's backlog (``collector.ingest.backlog``: it holds its merges), freshness
(``collector.ingest.freshness``) and the C heap trimmed (``collector.ingest.heap``).

The contract, per batch, in the order the writer keeps:

1. ``before_insert``: after the batch is announced to the spool, before the insert; may return
   a changed table (the one inserted).
2. ``after_insert``: the spans are stored, the spool not yet told: a crash here replays the
   batch, so what a hook writes here is redone, never lost.
3. ``after_release``: the spool committed the batch and its buffers are free.

Hooks run in the given order, in one worker thread per step, never two steps at once. Between
batches, ``due`` says when a hook has work of its own (``None``: never) and ``when_idle`` does it
(in a worker thread, with the store reachable). ``enqueued`` runs on the event loop and must not
block. A hook must not raise for a store that is away: it logs, counts where it matters, and
skips (the store may be reopened by the time of the next batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa


@dataclass(slots=True)
class Batch:
    """One insert: its spans, the spool sequence numbers they came from, and its circumstances."""

    table: pa.Table
    seqs: list[int]
    replayed: bool = False  # a batch a crash interrupted, replayed from the spool as it was
    backlog: bool = False  # at least ``flush_rows`` more spans wait behind it


class InsertHook:
    """Every method a no-op: a hook overrides what it needs."""

    def enqueued(self, seq: int, table: pa.Table) -> None:
        """A durable request's spans joined the queue (on the event loop: must not block)."""

    def before_insert(self, batch: Batch) -> pa.Table:
        """The table to insert (``batch.table``, or a changed one)."""
        return batch.table

    def after_insert(self, batch: Batch) -> None:
        """The batch is stored; the spool commits it after every hook returned."""

    def after_release(self, *, drained: bool) -> None:
        """The batch left the queue and its buffers are free; ``drained``: nothing else waits."""

    def due(self) -> float | None:
        """Seconds until this hook's own work is due (0: now), or None: it has none."""
        return None

    def when_idle(self) -> None:
        """The hook's own work, when ``due`` said 0 and no batch is due."""

    def forget(self, project: str, trace_ids: list[str] | None) -> None:
        """Deleted traces (``None``: the whole project): forget what the hook remembers of them."""


class Hooks(InsertHook):
    """The hooks a writer was given, as one: each call goes to every hook, in order (like
    OpenTelemetry's ``SynchronousMultiSpanProcessor``); ``before_insert`` hands each the table the
    previous one returned."""

    def __init__(self, hooks: Sequence[InsertHook] = ()) -> None:
        self._hooks = tuple(hooks)

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def enqueued(self, seq: int, table: pa.Table) -> None:
        for hook in self._hooks:
            hook.enqueued(seq, table)

    def before_insert(self, batch: Batch) -> pa.Table:
        for hook in self._hooks:
            batch.table = hook.before_insert(batch)
        return batch.table

    def after_insert(self, batch: Batch) -> None:
        for hook in self._hooks:
            hook.after_insert(batch)

    def after_release(self, *, drained: bool) -> None:
        for hook in self._hooks:
            hook.after_release(drained=drained)

    def due(self) -> float | None:
        return min((due for hook in self._hooks if (due := hook.due()) is not None), default=None)

    def when_idle(self) -> None:
        for hook in self._hooks:
            if hook.due() == 0:
                hook.when_idle()

    def forget(self, project: str, trace_ids: list[str] | None) -> None:
        for hook in self._hooks:
            hook.forget(project, trace_ids)
