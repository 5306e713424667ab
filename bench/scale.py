"""Scale benchmark (issue 19): what it costs for several collectors to share one ClickHouse.

    python -m bench.scale [--spans 200000] [--out bench/results/scale]

Against ``AGENTWATCH_CLICKHOUSE_URL`` when set (a ClickHouse server), else ClickHouse's HTTP
interface over chDB (``tests.collector.clickhouse_http`` in a subprocess: the real engine, one
statement at a time, so absolute rates are that stand-in's, not a server's). With
``bench.ingest``'s agent-like spans in batches of 20k (the writer's batch size):

1. ``alone``: ``ClickHouseStore.insert_spans`` without the span-writer lease (one collector that
   owns the server; every span is still looked up in the store, as before this issue).
2. ``leased``: the same with the lease (what every collector on a shared server does).
3. ``two_writers``: two stores (two collectors), each inserting half of the spans from its
   own thread, both with the lease: inserts are serialised across collectors, so this is
   the rate a pair of collectors gets from one store.
4. ``lease_round_trip``: taking and handing back the lease with nothing inside, alone: the
   fixed cost each batch pays (two statements to take it after a hand-back, one to hand it back).

``--phases memory``: one collector on embedded chDB takes a burst of ``--burst-spans`` agent spans
with captured prompt/completion text (``reference_agent.workload``, ~700 B a span, 4 senders, as fast as it
answers), with ``AGENTWATCH_MAX_QUEUE_BYTES=0`` (no bound in bytes), the default 128 MiB, 32 MiB and
16 MiB, then 128 MiB with ``SMALL_MEMORY`` (decoded spans beyond the bound spill to disk, ``collector.ingest.spill``): peak RSS and peak
anonymous memory (RSS less mapped files such as chDB's library and the spill) of the collector,
sampled every 0.1 s from the first send until ``AFTER_BURST_S`` after the last span is stored (the
merges held during a burst catch up then; the peak until the last span alone is reported beside
it), spans/s from first send to all stored, and the collector's CPU time per span until then
(what a loaded machine changes least).

``--phases memory_clickhouse``: the same burst into a collector writing to ClickHouse over HTTP (the
configured server, else the stand-in above; a fresh database per bound), the scale-out shape whose
collectors hold no chDB; the stand-in's own peak anonymous memory is reported beside the collector's.

``--phases backfill``: the run closer's first pass (the backfill after an upgrade,
``collector.storage.run_closes``) over an embedded chDB store of ``--backfill-days`` days of
``--backfill-spans-per-day`` agent spans without text (``bench.ingest.fill``): its time, CPU and the
peak anonymous memory it adds to the process that runs it (the collector holding the closer role).

Figures go to ``bench/results/scale.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from agentwatch_platform.collector.storage.clickhouse_store import ClickHouseStore
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.lease import SpanWriteLock
from bench import report
from bench.ingest import span_batches

RESULTS = Path(__file__).parent / "results"
AFTER_BURST_S = 8.0  # memory is sampled this long after the last span is stored
MEMORY_BOUNDS = (0, 128 * 2**20, 32 * 2**20, 16 * 2**20)  # AGENTWATCH_MAX_QUEUE_BYTES of the memory phases
# The memory phase's last run: the default bound with glibc's mmap threshold fixed, the one setting that took
# the burst under 250 MB before the decode thread trimmed the heap itself (now it only costs spans/s).
SMALL_MEMORY = {"AGENTWATCH_MALLOC_MMAP_THRESHOLD_BYTES": "524288"}
REPO = Path(__file__).resolve().parents[1]


@contextmanager
def clickhouse() -> Iterator[tuple[str, int | None]]:
    """A ClickHouse HTTP URL: the configured server, or the chDB-backed interface in a subprocess,
    with the pid of that stand-in (None for a configured server)."""
    if url := os.environ.get("AGENTWATCH_CLICKHOUSE_URL", ""):
        yield url, None
        return
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.collector.clickhouse_http", tmp], cwd=REPO, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        try:
            yield f"http://127.0.0.1:{port}/default", proc.pid
        finally:
            proc.terminate()
            proc.wait(30)


def store_description() -> str:
    if os.environ.get("AGENTWATCH_CLICKHOUSE_URL"):
        return "ClickHouse server"
    return "ClickHouse HTTP interface over chDB (tests.collector.clickhouse_http)"


def fresh_database(url: str) -> str:
    import clickhouse_connect

    database = f"aw_bench_{uuid.uuid4().hex[:8]}"
    admin = clickhouse_connect.get_client(dsn=url)
    admin.command(f"CREATE DATABASE {database}")
    admin.close()
    return url.rsplit("/", 1)[0] + f"/{database}"


def tables(spans: int, seed: int) -> list[pa.Table]:
    return [spans_table(batch) for batch in span_batches(spans, seed=seed)]


def insert_rate(stores: list[ClickHouseStore], batches: list[list[pa.Table]]) -> dict[str, Any]:
    """Every store inserts its batches from its own thread; spans/s from first to last insert."""

    def insert(store: ClickHouseStore, mine: list[pa.Table]) -> None:
        for table in mine:
            store.insert_spans(table)

    threads = [threading.Thread(target=insert, args=pair) for pair in zip(stores, batches, strict=True)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    spans = sum(t.num_rows for mine in batches for t in mine)
    stored = stores[0].query("SELECT count() AS n FROM spans")[0]["n"]
    return {"spans": spans, "stored": stored, "insert_s": round(elapsed, 3), "spans_per_s": round(spans / elapsed)}


def phase(url: str, spans: int, *, shared: bool, writers: int) -> dict[str, Any]:
    database = fresh_database(url)
    stores = [ClickHouseStore(database, shared=shared, holder=f"bench-{i}") for i in range(writers)]
    try:
        stores[0].migrate()
        batches = [tables(spans // writers, seed=7 + i) for i in range(writers)]
        figures = insert_rate(stores, batches)
        figures["lease_waits"] = sum(s.write_lock.waits for s in stores if s.write_lock is not None)
        return figures
    finally:
        for store in stores:
            store.close()


def lease_round_trip(url: str, repeats: int = 50) -> dict[str, Any]:
    store = ClickHouseStore(fresh_database(url), shared=False)
    try:
        store.migrate()
        lock = SpanWriteLock(store, "bench")
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            with lock.hold():
                pass
            times.append(time.perf_counter() - started)
        return {
            "repeats": repeats,
            "p50_ms": round(statistics.median(times) * 1000, 2),
            "max_ms": round(max(times) * 1000, 2),
        }
    finally:
        store.close()


def phase_memory(
    spans: int, max_queue_bytes: int, store_pid: int | None = None, settings: dict[str, str] | None = None
) -> dict[str, Any]:
    """The collector's memory during a burst with captured text (see the module docstring), and
    the peak of ``store_pid`` (a ClickHouse the collector writes to) when given; ``settings``:
    more of the collector's environment for this run."""
    from agentwatch_platform.reference_agent.workload import Workload
    from bench.compare import RssSampler
    from bench.ingest import Collector, _send_all, _wait_stored

    os.environ["AGENTWATCH_MAX_QUEUE_BYTES"] = str(max_queue_bytes)
    store = RssSampler(store_pid) if store_pid else None
    if store is not None:
        store.start()
    workload = Workload(spans, end_time_ns=time.time_ns(), batch_spans=1000, project="bench", content=True)
    bodies = list(workload.batches())
    with tempfile.TemporaryDirectory() as tmp, _environ(settings or {}), Collector(Path(tmp)) as collector:
        key = collector.key("bench")
        assert collector.proc is not None
        sampler = RssSampler(collector.proc.pid)
        sampler.start()
        started = time.perf_counter()
        _send_all(collector.url, key, bodies, 4, "protobuf")
        stored_s = _wait_stored(collector, workload.totals.spans, started)
        cpu_s = _cpu_s(collector.proc.pid)
        burst_rss, burst_anon = sampler.peak_rss, sampler.peak_anon
        time.sleep(AFTER_BURST_S)  # the merges held during the burst catch up now: their peak counts too
        peak_rss, peak_anon = sampler.stop()
    store_peak = {"store_peak_anon_mb": round(store.stop()[1] / 2**20)} if store is not None else {}
    return store_peak | {
        "max_queue_bytes": max_queue_bytes,
        "settings": " ".join(f"{name}={value}" for name, value in (settings or {}).items()),
        "spans": workload.totals.spans,
        "stored_s": round(stored_s, 1),
        "spans_per_s": round(workload.totals.spans / stored_s),
        "peak_rss_mb": round(peak_rss / 2**20),
        "peak_anon_mb": round(peak_anon / 2**20),
        "burst_peak_anon_mb": round(burst_anon / 2**20),  # until the last span was stored
        "burst_peak_rss_mb": round(burst_rss / 2**20),
        "cpu_us_per_span": round(cpu_s / workload.totals.spans * 1e6, 1),
        "load_average_after": round(os.getloadavg()[0], 1),
    }


def phase_backfill(days: int, spans_per_day: int) -> dict[str, Any]:
    """The closer's first pass over ``days`` days of spans (see the module docstring)."""
    from agentwatch_platform.collector.storage.chdb_store import ChdbStore
    from agentwatch_platform.collector.storage.run_closes import close_runs
    from bench.compare import RssSampler
    from bench.ingest import DAY_NS, fill

    with tempfile.TemporaryDirectory() as tmp:
        store = ChdbStore(Path(tmp) / "chdb", retention_days=days + 30, result_cache_s=0)
        try:
            store.migrate()
            now, started = time.time_ns(), time.perf_counter()
            for day in range(days):  # the oldest day first, one day's spans ending each day's `now`
                fill(store, (day + 1) * spans_per_day, end_ns=now - (days - 1 - day) * DAY_NS)
            fill_s = time.perf_counter() - started
            runs = int(store.query("SELECT count() AS n FROM runs_agg FINAL")[0]["n"])
            time.sleep(2.0)  # the fill's last merges
            sampler = RssSampler(os.getpid(), interval_s=0.01)
            sampler.start()  # its first sample taken: the memory before the pass
            before_anon = sampler.peak_anon
            cpu_started, wall_started = time.process_time(), time.perf_counter()
            minutes = close_runs(store, margin_s=-1)
            wall, cpu = time.perf_counter() - wall_started, time.process_time() - cpu_started
            _, peak_anon = sampler.stop()
        finally:
            store.close()
    return {
        "days": days,
        "spans": days * spans_per_day,
        "run_rows": runs,
        "fill_s": round(fill_s),
        "minute_rows_written": minutes,
        "pass_s": round(wall, 1),
        "pass_cpu_s": round(cpu, 1),
        "anon_before_mb": round(before_anon / 2**20),
        "pass_peak_anon_mb": round(peak_anon / 2**20),
        "load_average_after": round(os.getloadavg()[0], 1),
    }


def phase_memory_clickhouse(spans: int) -> list[dict[str, Any]]:
    """``phase_memory`` for a collector writing to ClickHouse over HTTP (the scale-out shape: no
    chDB in the collector), one fresh database per bound, with the store's own peak beside it."""
    figures = []
    for bound in MEMORY_BOUNDS:
        with clickhouse() as (url, pid), _environ({"AGENTWATCH_CLICKHOUSE_URL": fresh_database(url)}):
            figures.append(phase_memory(spans, bound, store_pid=pid))
    return figures


@contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in the environment for the collectors started inside, as it was afterwards."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def _cpu_s(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Scale: many collectors on one ClickHouse, and one collector's memory",
        "",
        f"`{result['command']}` on {result['machine']}.",
    ]
    if "alone" in result:
        lines += lease_markdown(result)
    if "memory" in result:
        lines += [
            "",
            "## A burst with captured text: the collector's memory",
            "",
            f"Measured with {result.get('memory_measured', 'the command above')}; chDB and glibc allocator settings are the collector's "
            "defaults (collector/storage/chdb_memory.py, collector/tuning.py).",
            "",
            f"| AGENTWATCH_MAX_QUEUE_BYTES | spans | spans/s | collector CPU µs/span | peak RSS MB | peak anonymous MB (until {AFTER_BURST_S:.0f} s after) | until the last span stored | load after |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {m['max_queue_bytes']}{' + ' + m['settings'] if m.get('settings') else ''} | {m['spans']} | {m['spans_per_s']} | {m.get('cpu_us_per_span', '-')} | {m['peak_rss_mb']} | {m['peak_anon_mb']} | {m.get('burst_peak_anon_mb', '-')} | {m['load_average_after']} |"
            for m in result["memory"]
        ]
        if before := result.get("memory_before"):  # the same command on the code before a change, for comparison
            lines += [
                "",
                f"Before ({before['what']}):",
                "",
                "| AGENTWATCH_MAX_QUEUE_BYTES | spans/s | collector CPU µs/span | peak RSS MB | peak anonymous MB | load after |",
                "|---|---:|---:|---:|---:|---:|",
            ]
            lines += [
                f"| {m['max_queue_bytes']} | {m['spans_per_s']} | {m.get('cpu_us_per_span', '-')} | {m['peak_rss_mb']} | {m['peak_anon_mb']} | {m['load_average_after']} |"
                for m in before["memory"]
            ]
        lines += [
            "",
            "Target (issue 19): peak anonymous memory <= 250 MB without losing more than 10 % of the ingest rate.",
        ]
        if notes := result.get("memory_notes"):  # where the peak goes and what was tried, written after measuring
            lines += ["", *(f"- {note}" for note in notes)]
    if "memory_clickhouse" in result:
        lines += [
            "",
            "## The same burst into a collector that writes to ClickHouse (the scale-out shape)",
            "",
            f"Measured with {result['memory_clickhouse_measured']}. The store is {result['memory_clickhouse_store']}; "
            "the stand-in's memory is chDB's behind HTTP, one statement at a time (so it is also what limits the rate), "
            "not a ClickHouse server's. The collector holds no chDB: its idle floor (~94 MB) is Python's alone.",
            "",
            "| AGENTWATCH_MAX_QUEUE_BYTES | spans | spans/s | collector CPU µs/span | collector peak anonymous MB (until 8 s after) | until the last span stored | store peak anonymous MB | load after |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {m['max_queue_bytes']} | {m['spans']} | {m['spans_per_s']} | {m['cpu_us_per_span']} | {m['peak_anon_mb']} | {m['burst_peak_anon_mb']} | {m.get('store_peak_anon_mb', '-')} | {m['load_average_after']} |"
            for m in result["memory_clickhouse"]
        ]
    if backfill := result.get("backfill"):
        lines += [
            "",
            "## The run closer's backfill",
            "",
            f"Measured with {result['backfill_measured']}: the closer's first pass over {backfill['days']} days of "
            f"{backfill['spans'] // backfill['days']:,} spans without text ({backfill['run_rows']:,} rows of runs_agg, "
            f"filled in {backfill['fill_s']} s), in the benchmark's process, a day of runs per statement.",
            "",
            "| minute rows written | pass s | pass CPU s | anonymous MB before | peak anonymous MB in the pass | load after |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {backfill['minute_rows_written']} | {backfill['pass_s']} | {backfill['pass_cpu_s']} | "
            f"{backfill['anon_before_mb']} | {backfill['pass_peak_anon_mb']} | {backfill['load_average_after']} |",
        ]
    return "\n".join(lines) + "\n"


def lease_markdown(result: dict[str, Any]) -> list[str]:
    alone, leased, two = result["alone"], result["leased"], result["two_writers"]
    return [
        "",
        f"Store: {result['store']}. Measured with {result.get('lease_measured', 'the command above')}.",
        "",
        "| insert_spans, batches of 20k | spans | spans/s | lease waits |",
        "|---|---:|---:|---:|",
        f"| one collector, no lease | {alone['spans']} | {alone['spans_per_s']} | - |",
        f"| one collector, span-writer lease | {leased['spans']} | {leased['spans_per_s']} | {leased['lease_waits']} |",
        f"| two collectors (threads), lease | {two['spans']} | {two['spans_per_s']} | {two['lease_waits']} |",
        "",
        f"Taking and handing back the lease alone: p50 {result['lease_round_trip']['p50_ms']} ms, "
        f"max {result['lease_round_trip']['max_ms']} ms ({result['lease_round_trip']['repeats']} times).",
        f"Lease cost per span: {result['lease_cost_pct']:.1f} % of the one-collector rate.",
        "",
        *(f"- {note}" for note in result["notes"]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000, help="spans inserted per phase")
    parser.add_argument("--burst-spans", type=int, default=500_000, help="spans of the memory phase's burst")
    parser.add_argument("--backfill-days", type=int, default=30, help="days of spans of the backfill phase")
    parser.add_argument(
        "--backfill-spans-per-day", type=int, default=1_000_000, help="spans a day of the backfill phase"
    )
    parser.add_argument(
        "--phases",
        default="lease,memory,memory_clickhouse",
        help="lease, memory, memory_clickhouse, backfill, comma-separated; figures of phases not run are kept from --out",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "scale")
    args = parser.parse_args(argv)
    phases = set(args.phases.split(","))
    if unknown := phases - {"lease", "memory", "memory_clickhouse", "backfill"}:
        parser.error(f"--phases: unknown phase(s) {sorted(unknown)}")
    previous = args.out.with_suffix(".json")
    result: dict[str, Any] = json.loads(previous.read_text()) if previous.exists() else {}
    result.update(command=" ".join(["python -m bench.scale", *sys.argv[1:]]), machine=report.machine())
    if "memory" in phases:
        result["memory_measured"] = f"`{result['command']}`, load average {os.getloadavg()[0]:.1f} at start"
        result["memory"] = [phase_memory(args.burst_spans, bound) for bound in MEMORY_BOUNDS]
        result["memory"].append(phase_memory(args.burst_spans, 128 * 2**20, settings=SMALL_MEMORY))
        print("memory:", result["memory"])
    if "memory_clickhouse" in phases:
        result["memory_clickhouse_measured"] = f"`{result['command']}`, load average {os.getloadavg()[0]:.1f} at start"
        result["memory_clickhouse_store"] = store_description()
        result["memory_clickhouse"] = phase_memory_clickhouse(args.burst_spans)
        print("memory_clickhouse:", result["memory_clickhouse"])
    if "backfill" in phases:
        result["backfill_measured"] = f"`{result['command']}`, load average {os.getloadavg()[0]:.1f} at start"
        result["backfill"] = phase_backfill(args.backfill_days, args.backfill_spans_per_day)
        print("backfill:", result["backfill"])
    if "lease" in phases:
        lease_phases(args, result)
    report.write(args.out, result, markdown(result))
    return 0


def lease_phases(args: argparse.Namespace, result: dict[str, Any]) -> None:
    result["lease_measured"] = f"`{result['command']}`, load average {os.getloadavg()[0]:.1f} at start"
    with clickhouse() as (url, _pid):
        result["store"] = store_description()
        result["alone"] = phase(url, args.spans, shared=False, writers=1)
        print("alone:", result["alone"])
        result["leased"] = phase(url, args.spans, shared=True, writers=1)
        print("leased:", result["leased"])
        result["two_writers"] = phase(url, args.spans, shared=True, writers=2)
        print("two_writers:", result["two_writers"])
        result["lease_round_trip"] = lease_round_trip(url)
        print("lease_round_trip:", result["lease_round_trip"])
    result["lease_cost_pct"] = 100 * (1 - result["leased"]["spans_per_s"] / result["alone"]["spans_per_s"])
    result["notes"] = [
        "Every span is looked up in the store in all three rows (ClickHouseStore never vouched for keys from memory): "
        "the lease adds its round trips per batch, not a per-span cost.",
        "The HTTP stand-in runs one statement at a time, so two writers cannot overlap there anyway; on a server the "
        "lease is what serialises their check-and-insert, while decoding and spooling stay parallel.",
        "The embedded chDB path (one collector owning its store) is unchanged: no lease, RecentKeys vouches for recent keys.",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
