"""When the writer's queue says a batch is due: computed from when spans arrived and were taken."""

from __future__ import annotations

import pyarrow as pa
import pytest

from agentwatch_platform.collector.ingest.write_queue import WriteQueue


def _queue(*requests: int, flush_rows: int = 100) -> WriteQueue:
    queue = WriteQueue(flush_rows=flush_rows, max_spans=10_000, max_bytes=0, reload=_no_reload, spill=None)
    for seq, spans in enumerate(requests):
        queue.enqueue(seq, pa.table({"span": list(range(spans))}))
    return queue


def _no_reload(seq: int) -> pa.Table:
    raise AssertionError(f"request {seq} was kept in memory")


def test_a_burst_that_has_ended_goes_in_once_it_is_quiet_not_an_interval_later() -> None:
    queue = _queue(10, 10, 10)  # 30 spans: past a quarter of flush_rows, just taken a batch (at start)
    assert queue.next_due(0.5) == pytest.approx(queue.latest + 0.05)


def test_a_few_spans_linger_an_interval_for_others_to_share_their_insert() -> None:
    queue = _queue(10, 10)  # 20 spans: under a quarter of flush_rows
    assert queue.next_due(0.5) == pytest.approx(min(queue.oldest, queue.latest) + 0.5)
    assert queue.next_due(0.5) > queue.latest + 0.05


def test_spans_after_a_quiet_spell_go_in_as_they_come() -> None:
    queue = _queue()
    queue.take()  # the last batch, taken an interval ago
    queue._last_take -= 0.5
    queue.enqueue(1, pa.table({"span": [1]}))
    assert queue.due(0.5)
