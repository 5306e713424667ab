"""The writer over a real spool, ingestor and chDB store: request tables batched, tables not kept
in memory read back from the spill or the spool, and a batch the store rejects split rather than dropped."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from agentwatch_platform.collector.ingest import insert
from agentwatch_platform.collector.ingest.backlog import BacklogHook
from agentwatch_platform.collector.ingest.normalize import Normalizer
from agentwatch_platform.collector.ingest.otlp.decode import PROTOBUF
from agentwatch_platform.collector.ingest.pipeline import Ingestor
from agentwatch_platform.collector.ingest.spill import Spill
from agentwatch_platform.collector.ingest.spool import Spool
from agentwatch_platform.collector.ingest.writer import Writer
from agentwatch_platform.collector.metrics import Metrics
from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.collector.storage import open_store
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.sql.runs import SPANS_OF_TRACE
from agentwatch_platform.collector.storage.texts import TextStore
from tests.collector.ingest_helpers import otlp_request
from tests.support.poll import wait_until

DAY_NS = 86_400 * 10**9


def _request(names: list[str], days: Sequence[int]) -> bytes:
    """One trace; span i starts ``days[i]`` days from now (each day is a partition of ``spans``)."""
    now = time.time_ns()
    spans = [
        {"span_id": os.urandom(8), "name": name, "start": now + d * DAY_NS, "end": now + d * DAY_NS + 1000}
        for name, d in zip(names, days, strict=True)
    ]
    return otlp_request(os.urandom(16), spans).SerializeToString()


async def _ingest(
    tmp_path: Path,
    bodies: list[bytes],
    *,
    max_queue_spans: int,
    max_queue_bytes: int = 0,
    spill: Spill | None = None,
    on_enqueued: Callable[[], None] = lambda: None,
) -> tuple[list[str], Metrics]:
    """Export ``bodies`` and stop the writer (one flush of everything); the names stored, sorted."""
    settings = Settings.from_env(data_dir=tmp_path, max_queue_spans=max_queue_spans)
    store = ChdbStore(tmp_path / "chdb")
    with _pipeline(
        tmp_path,
        settings,
        store,
        flush_rows=10_000,
        max_queue_spans=max_queue_spans,
        max_queue_bytes=max_queue_bytes,
        spill=spill,
    ) as (ingestor, writer, metrics):
        async with writer:
            ingestor.writer = writer
            for body in bodies:
                await ingestor.export("p1", body, PROTOBUF)
            on_enqueued()
        return sorted(r["name"] for r in store.query("SELECT name FROM spans")), metrics


@contextmanager
def _pipeline(
    tmp_path: Path,
    settings: Settings,
    store: ChdbStore,
    texts: Callable[[], TextStore | None] = lambda: None,
    **writer_options: Any,
) -> Iterator[tuple[Ingestor, Writer, Metrics]]:
    """A real spool, ingestor and writer over ``store`` (migrated here, closed with the rest);
    ``texts``: the text files the ingestor writes captured texts to as it decodes (as the app's)."""
    spool, metrics = Spool(tmp_path / "spool", max_bytes=1 << 26), Metrics()
    spool.open()
    ingestor = Ingestor(settings, normalizer=Normalizer(), spool=spool, metrics=metrics, texts=texts)
    store.migrate()
    try:
        writer = Writer(
            store=lambda: store,
            spool=spool,
            reload=ingestor.reload,
            metrics=metrics,
            flush_interval_s=60.0,
            drain_timeout_s=600.0,  # the tests stop with one flush of everything, however loaded the machine
            **writer_options,
        )
        yield ingestor, writer, metrics
    finally:
        ingestor.close()
        spool.close()
        store.close()


async def test_tables_not_kept_in_memory_are_read_back_from_the_spool(tmp_path: Path) -> None:
    bodies = [_request([f"r{r}-s{s}" for s in range(4)], [0] * 4) for r in range(3)]
    stored, metrics = await _ingest(tmp_path, bodies, max_queue_spans=5)  # only the first request stays in memory
    assert stored == sorted(f"r{r}-s{s}" for r in range(3) for s in range(4))
    assert metrics.totals["stored"] == 12


@pytest.mark.parametrize(("max_queue_bytes", "flushes"), [(0, 1), (1, 6)])
async def test_the_bound_in_bytes_keeps_spans_in_the_spool_and_batches_small(
    tmp_path: Path, max_queue_bytes: int, flushes: int
) -> None:
    bodies = [_request([f"r{r}-s{s}" for s in range(4)], [0] * 4) for r in range(6)]
    stored, metrics = await _ingest(tmp_path, bodies, max_queue_spans=1000, max_queue_bytes=max_queue_bytes)
    assert stored == sorted(f"r{r}-s{s}" for r in range(6) for s in range(4))
    assert metrics.registry.get_sample_value("agentwatch_collector_flush_seconds_count") == flushes


@pytest.mark.parametrize("lose_one", [False, True])
async def test_spans_beyond_the_bound_are_spilled_decoded_and_deleted_once_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lose_one: bool
) -> None:
    """Only the first request stays in memory; the others come back from their spill files (not
    decoded again), or from the spool for a file that went missing; none is left once stored."""
    spill = Spill(tmp_path / "spill")
    spill.clear()
    (tmp_path / "spill" / "stale.arrow").write_bytes(b"from a previous run")
    spill.clear()
    decoded: list[int] = []
    monkeypatch.setattr(Ingestor, "reload", lambda self, seq: decoded.append(seq) or _decode_again(self, seq))

    def files() -> list[str]:
        return sorted(p.name for p in (tmp_path / "spill").iterdir())

    def after_enqueue() -> None:
        assert files() == [f"{seq:012d}.arrow" for seq in (2, 3)]
        if lose_one:
            (tmp_path / "spill" / f"{2:012d}.arrow").unlink()

    bodies = [_request([f"r{r}-s{s}" for s in range(4)], [0] * 4) for r in range(3)]
    stored, metrics = await _ingest(tmp_path, bodies, max_queue_spans=5, spill=spill, on_enqueued=after_enqueue)
    assert stored == sorted(f"r{r}-s{s}" for r in range(3) for s in range(4))
    assert decoded == ([2] if lose_one else [])
    assert files() == []
    assert spill.failures == 0


def test_a_torn_spill_file_is_not_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spill = Spill(tmp_path)
    table = pa.table({"name": ["a", "b"]})
    assert spill.write(7, table)
    assert spill.read(7) == table
    path = tmp_path / f"{7:012d}.arrow"
    path.write_bytes(path.read_bytes()[:-40])
    assert spill.read(7) is None
    assert spill.failures == 1 and "decoded again from the spool" in caplog.text


_decode_again = Ingestor.reload


async def test_a_batch_the_store_rejects_is_split_and_no_span_is_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """150 spans on 150 days exceed the store's 100 partitions per insert: the halves go in."""
    bodies = [
        _request([f"a{d:03}" for d in range(75)], range(75)),
        _request([f"b{d:03}" for d in range(75)], range(75, 150)),
    ]
    stored, metrics = await _ingest(tmp_path, bodies, max_queue_spans=1_000)
    assert stored == sorted([f"a{d:03}" for d in range(75)] + [f"b{d:03}" for d in range(75)])
    assert metrics.totals["stored"] == 150
    assert metrics.rejected.labels("store_rejected")._value.get() == 0
    assert "the store rejected a batch of 150 spans" in caplog.text


class _MergesAtInsert(ChdbStore):
    """Records whether the spans table's merges were held at each insert."""

    held: list[bool]

    def insert_spans(self, spans: pa.Table | Sequence[SpanRow], *, dedup_token: str | None = None) -> int:
        self.held.append(self.merges_held)
        return super().insert_spans(spans, dedup_token=dedup_token)


@pytest.mark.parametrize(
    ("hold_limit_s", "max_queue_bytes", "held"),
    [
        (30.0, 1, [True] * 11 + [False]),
        (1e-9, 1, [True] + [False] * 11),
        (0.0, 1, [False] * 12),
        (30.0, 0, [False] * 2),
    ],
)
async def test_merges_wait_while_a_backlog_is_inserted_for_a_limited_time(
    tmp_path: Path, hold_limit_s: float, max_queue_bytes: int, held: list[bool]
) -> None:
    """Twelve requests of 4 spans queued before the writer runs, one batch each (a bound of 1 byte):
    the merges wait while more than ``flush_rows`` spans wait behind a batch, and run again once the
    queue is drained, or once they waited ``AGENTWATCH_CHDB_MERGE_HOLD_S`` (then not held again in
    that backlog; 0: never held). Without a bound in bytes (batches of 32 spans) they never wait."""
    settings = Settings.from_env(data_dir=tmp_path, chdb_merge_hold_s=hold_limit_s)
    store = _MergesAtInsert(tmp_path / "chdb", merge_hold_s=hold_limit_s if max_queue_bytes > 0 else 0.0)
    store.held = []
    with _pipeline(
        tmp_path,
        settings,
        store,
        flush_rows=4,
        max_queue_spans=1000,
        max_queue_bytes=max_queue_bytes,
        hooks=[BacklogHook(lambda: store)],
    ) as (ingestor, writer, _):
        ingestor.writer = writer
        for r in range(12):
            await ingestor.export("p1", _request([f"r{r}-s{s}" for s in range(4)], [0] * 4), PROTOBUF)
        async with writer:
            pass
        assert store.held == held
        assert not store.merges_held
        assert store.query("SELECT count() AS n FROM spans") == [{"n": 48}]


async def test_requests_decoded_before_and_after_the_store_opened_share_a_batch_with_their_texts(
    tmp_path: Path,
) -> None:
    """Until the store is open the ingestor has no text files: those requests keep their texts
    (and no ``text_ref``) until the insert, the later ones wrote theirs at decode; one batch takes both."""
    settings = Settings.from_env(data_dir=tmp_path, max_queue_spans=1000)
    store = ChdbStore(tmp_path / "chdb")
    opened: list[bool] = []
    with _pipeline(
        tmp_path, settings, store, lambda: store.texts if opened else None, flush_rows=10_000, max_queue_spans=1000
    ) as (ingestor, writer, _):
        async with writer:
            ingestor.writer = writer
            traces = [os.urandom(16) for _ in range(4)]
            for i, trace in enumerate(traces):
                if i == 2:
                    opened.append(True)
                span = {"span_id": os.urandom(8), "name": "chat", "attrs": {"input.value": f"prompt {i}"}}
                await ingestor.export("p1", otlp_request(trace, [span]).SerializeToString(), PROTOBUF)
        for i, trace in enumerate(traces):
            rows = store.query(SPANS_OF_TRACE, {"project": "p1", "trace_id": trace.hex(), "limit": 10})
            assert rows[0]["text_ref"] and rows[0]["input_text"] == ""  # every text in the files, none in chDB
            store.read_texts(rows, project="p1", trace_id=trace.hex())
            assert rows[0]["input_text"] == f"prompt {i}"


@pytest.mark.parametrize("threads", [1, 2])
async def test_large_bodies_are_decoded_on_as_many_threads_as_configured(tmp_path: Path, threads: int) -> None:
    """``AGENTWATCH_DECODE_THREADS``: eight large requests at once take that many decode threads, never more."""
    settings = Settings.from_env(data_dir=tmp_path, max_queue_spans=100_000, decode_threads=threads)
    store = ChdbStore(tmp_path / "chdb")
    seen: set[str] = set()
    with _pipeline(tmp_path, settings, store, flush_rows=100_000, max_queue_spans=100_000) as (ingestor, writer, _):
        convert = ingestor._convert

        def noting(*args: Any) -> Any:
            seen.add(threading.current_thread().name)
            # busy until the pool has started as many threads as it may: however late a loaded
            # machine runs the next request, it finds this thread busy and starts another
            wait_until(lambda: len(seen) >= threads, 60, f"{threads} decode threads were never busy at once")
            return convert(*args)

        ingestor._convert = noting  # type: ignore[method-assign]
        async with writer:
            ingestor.writer = writer
            names = [f"span-{i}-" + "x" * 200 for i in range(200)]  # ~45 KiB: over the inline limit
            await asyncio.gather(*(ingestor.export("p1", _request(names, [0] * 200), PROTOBUF) for _ in range(8)))
        assert store.query("SELECT count() AS n FROM spans") == [{"n": 1600}]
    assert len(seen) == threads and all(name.startswith("agentwatch-decode") for name in seen)


async def test_the_c_heap_is_trimmed_every_eighth_body_decoded_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bodies decoded in a thread free ~1 MB each between the queue's buffers: every 8th, the
    heap's free pages go back (``collector.ingest.heap``); small bodies decoded inline do not count."""
    from agentwatch_platform.collector.ingest import pipeline

    trims: list[str] = []
    monkeypatch.setattr(pipeline.heap, "trim", lambda: trims.append(threading.current_thread().name) or True)
    settings = Settings.from_env(data_dir=tmp_path, max_queue_spans=100_000)
    store = ChdbStore(tmp_path / "chdb")
    with _pipeline(tmp_path, settings, store, flush_rows=100_000, max_queue_spans=100_000) as (ingestor, writer, _):
        async with writer:
            ingestor.writer = writer
            large = [f"span-{i}-" + "x" * 200 for i in range(200)]  # ~45 KiB: decoded in a thread
            for _ in range(17):
                await ingestor.export("p1", _request(large, [0] * 200), PROTOBUF)
            for _ in range(9):
                await ingestor.export("p1", _request(["small"], [0]), PROTOBUF)  # inline
            assert len(trims) == 2 and all(name.startswith("agentwatch-decode") for name in trims)


@pytest.mark.parametrize(("max_queue_bytes", "held"), [(1 << 20, True), (0, False)])
def test_an_opened_embedded_store_holds_its_merges_for_a_backlog_only_with_a_bound_in_bytes(
    tmp_path: Path, max_queue_bytes: int, held: bool
) -> None:
    """``open_store`` gives the store its merge hold (``AGENTWATCH_CHDB_MERGE_HOLD_S``) only where
    batches are bounded in bytes; a drained queue lets the merges run again."""
    settings = Settings.from_env(data_dir=tmp_path, chdb_merge_hold_s=30.0, max_queue_bytes=max_queue_bytes)
    store = open_store(settings)
    try:
        assert isinstance(store, ChdbStore)
        store.backlog(True)
        assert store.merges_held is held
        store.backlog(False)
        assert not store.merges_held
    finally:
        store.close()


_MEMORY_REFUSAL = (
    "chDB query failed: Code: 241. DB::Exception: (total) memory limit exceeded: would use 48.15 MiB "
    "(attempt to allocate chunk of 4.10 MiB), current RSS: 7.20 MiB, maximum: 48.00 MiB. (MEMORY_LIMIT_EXCEEDED)"
)


class _UnderMemoryPressure(ChdbStore):
    """chDB with its memory limit taken by other work, as on a loaded machine: its first inserts are
    refused for memory whatever their size, the next fails reading the batch's Arrow stream (what
    chDB said then), and the rest go in. The sizes it was asked to insert are kept."""

    failures = [_MEMORY_REFUSAL] * 6 + ["Unexpected empty message in IPC file format"]
    asked: list[int]

    def insert_spans(self, spans: pa.Table | Sequence[SpanRow], *, dedup_token: str | None = None) -> int:
        self.asked.append(len(spans))
        if len(self.asked) <= len(self.failures):
            raise RuntimeError(self.failures[len(self.asked) - 1])
        return super().insert_spans(spans, dedup_token=dedup_token)


async def test_a_store_short_of_memory_is_waited_for_and_never_loses_a_span(tmp_path: Path) -> None:
    """A batch refused for memory is halved down to ``MEMORY_SPLIT_FLOOR`` spans, then retried whole
    after a pause (not split into 2-span inserts, each refused again); an Arrow stream chDB failed
    to read is retried too, never taken for bad spans and dropped one by one."""
    settings = Settings.from_env(data_dir=tmp_path, max_queue_spans=10_000)
    store = _UnderMemoryPressure(tmp_path / "chdb")
    store.asked = []
    names = [f"r{r}-s{s:04}" for r in range(3) for s in range(1000)]
    options = {"flush_rows": 3_000, "max_queue_spans": 10_000}
    with _pipeline(tmp_path, settings, store, **options) as (ingestor, writer, metrics):
        async with writer:
            ingestor.writer = writer
            # One request: requests apart by more than the queue's settling pause (a loaded machine)
            # would go in as batches of their own, not as the 3,000-span batch this test follows.
            await ingestor.export("p1", _request(names, [0] * len(names)), PROTOBUF)
            deadline = time.monotonic() + 300  # the writer retries after its pauses; a stop would leave it to the spool
            while metrics.totals["stored"] < 3_000 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        stored = sorted(r["name"] for r in store.query("SELECT name FROM spans"))
    assert stored == names
    assert metrics.totals["stored"] == 3_000
    assert metrics.rejected.labels("store_rejected")._value.get() == 0
    assert min(store.asked) >= insert.MEMORY_SPLIT_FLOOR // 2  # halved no further than the floor's half
    assert store.asked[:3] == [3_000, 1_500, 750]  # then the pause, and the whole batch again
