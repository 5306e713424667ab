"""Storage benchmark: ingestion rate, bytes on disk per span, query latency at scale.

    python -m bench.ingest [--ingest-spans 1000000] [--spans 10000000] [--phases http,http_json,http_small,lag,live_overhead,store,query]

Phases (each prints its figures; all are written to ``bench/results/ingest.json`` and ``.md``):

1. ``http``: spans per second from the first send until every span is stored (so queryable),
   through the real collector (``agentwatch collector`` in a subprocess, OTLP/HTTP protobuf,
   project API key, 4 concurrent senders), with ``reference_agent.workload``'s agent-like traces: once
   with ~700 B of captured prompt/completion text per span, once without captured text.
   ``http_json``: the same without captured text, sent as OTLP/HTTP JSON (``application/json``,
   as the JavaScript exporter sends it). ``http_small``: 300k spans, one agent run (~40 spans)
   a request, 8 senders: requests per second, what the per-request costs allow. ``lag``: a
   span's end to its visibility through the query API (``bench.visibility``): p50/p95 over
   probes (one LLM span of a running run each) until the run detail and the running runs list
   show it, on an idle collector and while two senders keep it ingesting. ``live_overhead``: the
   writer's extra work for runs listed while they run, A/B in one store (see its function).
2. ``store``: the same count of agent-like spans without captured content, generated as
   ``SpanRow`` batches of 20k (the writer's batch size), made into Arrow tables (the form
   decode hands on, not timed) and inserted with ``Store.insert_spans``: the storage side's
   own rate, and bytes on disk per span.
3. ``query``: the store filled to ``--spans`` spans over the last 24 hours (generated inside
   ClickHouse), then p50/p95 of the overview and runs-list queries, the way the API runs them,
   with the store's result cache off (each call plans and runs its SQL; the collector's cache
   would answer a repeated question from memory).

Targets (2-core machine): >= 100k spans/s, <= 60 bytes/span on disk without content,
overview p95 < 300 ms at 10M spans.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from agentwatch_api import handshake
from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.run_closes import close_runs
from agentwatch_platform.reference_agent.supervisor import collector_command
from bench import report

RESULTS = Path(__file__).parent / "results"
BATCH = 20_000
SPANS_PER_TRACE = 30
DAY_NS = 86_400 * 10**9
TARGETS = {"spans_per_s": 100_000, "bytes_per_span": 60, "overview_p95_ms": 300}


# --- agent-like spans ------------------------------------------------------------------------
def span_batches(total: int, *, seed: int = 7) -> Iterator[list[SpanRow]]:
    """Runs of 30 spans (run, then step/LLM/tool triples), no captured content, ``BATCH`` a batch.

    Like live traffic, a run arrives as it ends: it started 40 to 50 seconds ago.
    """
    rng = random.Random(seed)
    batch: list[SpanRow] = []
    made = 0
    while made < total:
        trace = _trace(
            rng,
            time.time_ns() - 40 * 10**9 - rng.randrange(10 * 10**9),
            min(SPANS_PER_TRACE, total - made),
        )
        batch.extend(trace)
        made += len(trace)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _trace(rng: random.Random, t0: int, count: int) -> list[SpanRow]:
    trace_id, root = f"{rng.getrandbits(128):032x}", f"{rng.getrandbits(64):016x}"
    agent, resource = (
        f"agent-{rng.randrange(5)}",
        {"service.name": "bench", "telemetry.sdk.name": "opentelemetry"},
    )
    common = {
        "project": "bench",
        "trace_id": trace_id,
        "service_name": "bench",
        "agent_name": agent,
        "resource": resource,
    }
    spans = [
        SpanRow(
            **common,
            span_id=root,
            parent_span_id="",
            name=agent,
            kind="run",
            start_time_ns=t0,
            end_time_ns=t0 + 100 * 10**9,
            outcome="success" if rng.random() < 0.8 else "failure",
        )
    ]
    step = root
    for i in range(1, count):
        span_id, start = f"{rng.getrandbits(64):016x}", t0 + i * 10**9 + rng.randrange(10**8)
        kind = ("tool", "step", "llm")[i % 3]
        if kind == "step":
            step = span_id
        spans.append(_child(rng, common, kind, span_id, root if kind == "step" else step, start, i))
    return spans


def _child(
    rng: random.Random,
    common: dict[str, Any],
    kind: str,
    span_id: str,
    parent: str,
    start: int,
    i: int,
) -> SpanRow:
    end = start + rng.randrange(10**8, 2 * 10**9)
    if kind == "llm":
        model = "sim-small" if rng.random() < 0.7 else "sim-large"
        inp, out = 500 + 100 * i + rng.randrange(500), 50 + rng.randrange(200)
        price = (0.10, 0.40) if model == "sim-small" else (2.50, 10.00)
        return SpanRow(
            **common,
            span_id=span_id,
            parent_span_id=parent,
            name=f"chat {model}",
            kind="llm",
            start_time_ns=start,
            end_time_ns=end,
            model=model,
            input_tokens=inp,
            output_tokens=out,
            cost_usd=(inp * price[0] + out * price[1]) / 1e6,
            ttft_s=0.05 + rng.random() / 2,
            tpot_s=0.01 + rng.random() / 50,
            step_index=i // 3,
            attributes={"gen_ai.operation.name": "chat"},
        )
    failed = kind == "tool" and rng.random() < 0.1
    return SpanRow(
        **common,
        span_id=span_id,
        parent_span_id=parent,
        name="search" if kind == "tool" else f"step {i // 3}",
        kind=kind,
        start_time_ns=start,
        end_time_ns=end,
        tool_name="search" if kind == "tool" else "",
        step_index=i // 3,
        status_code="error" if failed else "ok",
    )


# The same shape generated inside ClickHouse, for the 10M-span fill (Python would take minutes). A run's
# root carries its user (one of 1,000) and session (four runs each), as the SDK sets them on the root only.
_HEX = "lower(leftPad(hex(cityHash64({})), 16, '0'))"
FILL = f"""
INSERT INTO spans (project, trace_id, span_id, parent_span_id, name, kind, start_time, end_time, service_name, status_code,
    agent_name, model, input_tokens, output_tokens, cost_usd, ttft_s, tpot_s, tool_name, step_index, outcome, attributes, resource,
    user_id, session_id)
SELECT 'bench', {_HEX.format("t, 1")} || {_HEX.format("t, 2")}, {_HEX.format("t, i, 3")},
    multiIf(i = 0, '', i % 3 = 1, {_HEX.format("t, 0, 3")}, {_HEX.format("t, i - (i + 2) % 3, 3")}),
    multiIf(i = 0, agent, i % 3 = 1, 'step', i % 3 = 2, concat('chat ', model_), 'search'),
    multiIf(i = 0, 'run', i % 3 = 1, 'step', i % 3 = 2, 'llm', 'tool') AS kind_,
    fromUnixTimestamp64Nano(t0 + i * 1000000000 + toInt64(cityHash64(t, i, 5) % 100000000)),
    fromUnixTimestamp64Nano(t0 + if(i = 0, 100000000000, i * 1000000000 + 100000000 + toInt64(cityHash64(t, i, 6) % 1900000000))),
    'bench', if(kind_ = 'tool' AND cityHash64(t, i, 7) % 10 = 0, 'error', 'ok'), agent,
    if(kind_ = 'llm', model_, ''), toUInt32(if(kind_ = 'llm', 500 + 100 * i + cityHash64(t, i, 8) % 500, 0)),
    toUInt32(if(kind_ = 'llm', 50 + cityHash64(t, i, 9) % 200, 0)) AS out_,
    if(kind_ = 'llm', if(model_ = 'sim-small', (500 + 100 * i) * 0.10 + out_ * 0.40, (500 + 100 * i) * 2.5 + out_ * 10.0) / 1e6, 0),
    if(kind_ = 'llm', 0.05 + (cityHash64(t, i, 10) % 1000) / 2000, NULL), if(kind_ = 'llm', 0.01 + (cityHash64(t, i, 11) % 1000) / 50000, NULL),
    if(kind_ = 'tool', 'search', ''), toInt32(intDiv(i, 3)), if(i = 0, if(cityHash64(t, 12) % 10 < 8, 'success', 'failure'), ''),
    if(kind_ = 'llm', map('gen_ai.operation.name', 'chat'), map()), map('service.name', 'bench', 'telemetry.sdk.name', 'opentelemetry'),
    if(i = 0, concat('user-', toString(cityHash64(t, 14) % 1000)), ''), if(i = 0, concat('session-', toString(intDiv(t, 4))), '')
FROM (
    SELECT intDiv(number, {SPANS_PER_TRACE}) AS t, number % {SPANS_PER_TRACE} AS i,
        {{end_ns:Int64}} - 120000000000 - toInt64(cityHash64(t, 4) % {{window_ns:UInt64}}) AS t0,
        concat('agent-', toString(t % 5)) AS agent, if(cityHash64(t, 13) % 10 < 7, 'sim-small', 'sim-large') AS model_
    FROM numbers({{offset:UInt64}}, {{count:UInt64}})
)"""


# --- phases ----------------------------------------------------------------------------------
def disk_bytes(store: ChdbStore, table: str) -> dict[str, float]:
    row = store.query(
        "SELECT sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts WHERE active AND table = {t:String}",
        {"t": table},
    )[0]
    stored = int(row["bytes"]) + (store.texts.size_bytes() if table == "spans" else 0)  # captured texts' files too
    return {
        "rows": int(row["rows"]),
        "bytes": stored,
        "bytes_per_row": stored / max(1, row["rows"]),
    }


def phase_store(store: ChdbStore, spans: int) -> dict[str, Any]:
    """insert_spans rate at the writer's batch size, then bytes on disk per span."""
    elapsed = 0.0
    for batch in span_batches(spans):
        table = spans_table(batch)
        started = time.perf_counter()
        store.insert_spans(table)
        elapsed += time.perf_counter() - started
    stored = store.query("SELECT count() AS n FROM spans")[0]["n"]
    before = disk_bytes(store, "spans")
    store.command("OPTIMIZE TABLE spans FINAL")
    merged, runs = disk_bytes(store, "spans"), disk_bytes(store, "runs_agg")
    return {
        "spans": spans,
        "stored": stored,
        "insert_s": elapsed,
        "spans_per_s": spans / elapsed,
        "bytes_per_span": before["bytes_per_row"],
        "bytes_per_span_merged": merged["bytes_per_row"],
        "runs_agg_bytes_per_span": runs["bytes"] / max(1, stored),
    }


def phase_http(
    spans: int, senders: int = 4, *, content: bool = True, encoding: str = "protobuf", batch_spans: int = 1000
) -> dict[str, Any]:
    """The real collector in a subprocess: first send to every span stored."""
    from agentwatch_platform.reference_agent.workload import Workload, otlp_json

    workload = Workload(spans, end_time_ns=time.time_ns(), batch_spans=batch_spans, project="bench", content=content)
    with tempfile.TemporaryDirectory() as tmp, Collector(Path(tmp)) as collector:
        key = collector.key("bench")
        bodies = [otlp_json(body) for body in workload.batches()] if encoding == "json" else list(workload.batches())
        started = time.perf_counter()
        accepted = _send_all(collector.url, key, bodies, senders, encoding)
        sent_s = time.perf_counter() - started
        stored_s = _wait_stored(collector, workload.totals.spans, started)
        runs = httpx.get(
            f"{collector.url}/api/runs",
            params={"start": time.time() - 86_400, "end": time.time() + 60, "limit": 1},
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        ).json()["total"]
    return {
        "spans": workload.totals.spans,
        "accepted": accepted,
        "traces": workload.totals.traces,
        "runs_listed": runs,
        "send_s": sent_s,
        "stored_s": stored_s,
        "spans_per_s": workload.totals.spans / stored_s,
        "content_bytes_per_span": workload.totals.content_bytes / workload.totals.spans,
        "wire_bytes_per_span": sum(map(len, bodies)) / workload.totals.spans,
        "encoding": encoding,
        "requests": len(bodies),
        "requests_per_s": len(bodies) / stored_s,
        "senders": senders,
        "load_average_after": os.getloadavg()[0],
    }


def _send_all(url: str, key: str, bodies: list[bytes], senders: int, encoding: str) -> int:
    content_type = "application/json" if encoding == "json" else "application/x-protobuf"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": content_type}
    accepted = [0] * senders

    def send(worker: int) -> None:
        with httpx.Client(timeout=120) as client:
            for body in bodies[worker::senders]:
                while True:
                    response = client.post(f"{url}/v1/traces", content=body, headers=headers)
                    if response.status_code == 200:
                        accepted[worker] += 1
                        break
                    if response.status_code not in (429, 503):
                        raise RuntimeError(f"collector answered {response.status_code}: {response.text[:300]}")
                    time.sleep(float(response.headers.get("Retry-After", "0.2")) / 10)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(accepted)


def _wait_stored(collector: Collector, spans: int, started: float, timeout_s: float = 900) -> float:
    """Poll the collector-wide counters (the admin token's view: read from memory, so polling
    every 50 ms adds no store query to the ingestion being measured)."""
    headers = {"Authorization": f"Bearer {collector.admin_token}"}
    while time.perf_counter() - started < timeout_s:
        status = httpx.get(f"{collector.url}/api/ingest", headers=headers, timeout=60).json()
        if status["stored_spans"] >= spans:
            return time.perf_counter() - started
        time.sleep(0.05)
    raise RuntimeError(f"not all {spans} spans stored after {timeout_s} s")


class Collector:
    """``agentwatch collector`` in a subprocess on a free port, with a project key."""

    def __init__(self, data_dir: Path) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.data_dir, self.url = data_dir, f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Collector:
        env = {
            **os.environ,
            "AGENTWATCH_ALERT_INTERVAL_S": "0",
            "AGENTWATCH_RATE_LIMIT_SPANS_PER_S": "10000000",
        }
        self.proc = subprocess.Popen(collector_command(self.data_dir, port=self.port), env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/metrics", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("collector did not start")

    @property
    def admin_token(self) -> str:
        token = handshake.read_admin_token(self.data_dir)
        if token is None:
            raise RuntimeError(f"no admin token in {self.data_dir}: the collector has not started there")
        return token

    def key(self, project: str) -> str:
        response = httpx.post(
            self.url + "/admin/keys",
            json={"project": project},
            headers={"Authorization": f"Bearer {self.admin_token}"},
            timeout=60,
        )
        response.raise_for_status()
        return response.json()["key"]

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(120)


def phase_live_overhead(store: ChdbStore, spans: int, *, late_roots: bool) -> dict[str, Any]:
    """The writer's extra work for runs listed while they run (``LiveRuns.after_insert`` after
    each insert, issue 20): its own time against the insert's, and the insert rate of a project
    with it against one without, on the same store and like spans (each its own trace ids, so no
    duplicate look-ups; a batch to each in alternating order). Whole runs a batch, as the ingest benchmark sends them (a run split by a batch boundary
    opens a head), or with ``late_roots`` every run's root one batch after its other spans, as a
    live SDK sends them: every run opens a head (an INSERT ... SELECT over its stored spans)."""
    from dataclasses import replace

    from agentwatch_platform.collector.ingest.live_runs import LiveRuns

    live, held = LiveRuns(), {"plain": [], "live": []}
    elapsed, opening = {"plain": 0.0, "live": 0.0}, 0.0
    suffix = "-late" if late_roots else ""
    streams = {
        "plain": span_batches(spans, seed=7),
        "live": span_batches(spans, seed=8),
    }  # trace ids of their own: no look-ups
    for n in itertools.count():
        batches = {project: next(stream, None) for project, stream in streams.items()}
        if batches["plain"] is None or batches["live"] is None:
            break
        for project in ("plain", "live") if n % 2 == 0 else ("live", "plain"):
            rows = [replace(r, project=project + suffix) for r in batches[project]]
            if late_roots:
                table = spans_table(held[project] + [r for r in rows if r.kind != "run"])
                held[project] = [r for r in rows if r.kind == "run"]  # the roots come with the next batch
            else:
                table = spans_table(rows)
            started = time.perf_counter()
            store.insert_spans(table)
            if project == "live":
                inserted = time.perf_counter()
                live.after_insert(store, table)
                opening += time.perf_counter() - inserted
            elapsed[project] += time.perf_counter() - started
    plain, with_live = spans / elapsed["plain"], spans / elapsed["live"]
    return {
        "spans": spans,
        "late_roots": late_roots,
        "plain_spans_per_s": plain,
        "live_spans_per_s": with_live,
        "drop": 1 - with_live / plain,
        "open_us_per_span": opening / spans * 1e6,
        "open_share": opening / elapsed["live"],
        "heads_opened": live.opened,
        "load_average": os.getloadavg()[0],
    }


def phase_lag(probes: int, background_spans: int) -> dict[str, Any]:
    """Lag from a span's end to its visibility through the query API (``bench.visibility``),
    on an idle collector and while two senders keep it ingesting agent-like traces."""
    from agentwatch_platform.reference_agent.workload import Workload
    from bench import visibility

    with tempfile.TemporaryDirectory() as tmp, Collector(Path(tmp)) as collector:
        key = collector.key("bench")
        idle = visibility.measure(collector.url, key, probes)
        idle_sdk = visibility.measure(collector.url, key, probes, sdk=True)
        workload = Workload(background_spans, end_time_ns=time.time_ns(), project="bench", content=False)
        before = httpx.get(
            f"{collector.url}/api/ingest", headers={"Authorization": f"Bearer {collector.admin_token}"}, timeout=60
        ).json()
        started = time.perf_counter()
        with visibility.Background(collector.url, key, workload.batches()):
            loaded = visibility.measure(collector.url, key, probes)
            loaded_sdk = visibility.measure(collector.url, key, probes, sdk=True)
            elapsed = time.perf_counter() - started
            after = httpx.get(
                f"{collector.url}/api/ingest", headers={"Authorization": f"Bearer {collector.admin_token}"}, timeout=60
            ).json()
        rate = (after["stored_spans"] - before["stored_spans"]) / elapsed
        loaded["background_stored_spans_per_s"] = loaded_sdk["background_stored_spans_per_s"] = rate
    return {"idle": idle, "idle_sdk": idle_sdk, "under_load": loaded, "under_load_sdk": loaded_sdk}


def fill(store: ChdbStore, spans: int, *, end_ns: int, chunk: int = 1_000_000, window_ns: int = DAY_NS) -> float:
    """Top the store up to ``spans`` spans spread over the ``window_ns`` (24 hours) before ``end_ns``,
    ``chunk`` spans an insert (each insert a part of its own, as a collector writes them)."""
    have = int(store.query("SELECT count() AS n FROM spans")[0]["n"])
    started = time.perf_counter()
    # trace numbers apart from anything else in the store, and from an earlier fill's: a fill resumed
    # at a checkpoint used to number its traces from 10**12 again, so its runs took earlier runs' ids
    offset = -(-(10**12 + have) // SPANS_PER_TRACE) * SPANS_PER_TRACE
    while have < spans:
        count = min(chunk, spans - have)
        count -= count % SPANS_PER_TRACE or 0
        count = count or SPANS_PER_TRACE
        store.command(FILL, {"end_ns": end_ns, "window_ns": window_ns, "offset": offset, "count": count})
        offset, have = offset + count, have + count
    return time.perf_counter() - started


def latency(call: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Wall p50/p95 and the median CPU (``process_time``: chDB's threads included, so what a busy
    machine's other work does to wall time shows apart)."""
    call()  # warm caches, as a dashboard's second look would
    times, cpu = [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        call()
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    times.sort()
    return {
        "p50_ms": statistics.median(times),
        "p95_ms": times[min(len(times) - 1, round(0.95 * (len(times) - 1)))],
        "cpu_p50_ms": statistics.median(cpu),
        "repeats": repeats,
    }


def _aligned(now: float, step_s: int) -> float:
    """The end of a dashboard range: the end of the bucket of ``step_s`` now filling (``dashboard.ui.window``)."""
    return math.floor(now / step_s) * step_s + step_s


def phase_query(store: ChdbStore, spans: int, repeats: int, *, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    fill_s = fill(store, spans, end_ns=int(now * 1e9))
    big = _big_trace(store, now)
    settle_s = settle(store)
    closing = time.perf_counter()  # a collector's run closer has passed (collector.storage.run_closes)
    closed_minutes = close_runs(store)
    close_s = time.perf_counter() - closing
    load_at_start = os.getloadavg()[0]
    hour, day = (now - 3600, now), (now - 86_400, now)
    cases = {
        "overview_1h": lambda: overview_query.overview(store, "bench", start=hour[0], end=hour[1]),
        "overview_24h": lambda: overview_query.overview(store, "bench", start=day[0], end=day[1]),
        "runs_list_1h": lambda: runs_query.list_runs(store, "bench", start=hour[0], end=hour[1], limit=50),
        "runs_list_24h_by_cost": lambda: runs_query.list_runs(
            store, "bench", start=day[0], end=day[1], sort="-cost_usd", limit=50
        ),
        "runs_list_24h_filtered": lambda: runs_query.list_runs(
            store, "bench", start=day[0], end=day[1], agent="agent-3", min_steps=5, limit=50
        ),
        "timeseries_24h_by_model": lambda: metrics_query.timeseries(
            store, "bench", "cost_usd", day[0], day[1], 300, "model"
        ),
        "run_detail_10k_spans": lambda: runs_query.get_run(store, "bench", big),
        # what the dashboard asks: ranges aligned to their buckets (no cut minute), ending with the
        # bucket now filling, the collector's watermark 15 s back (README "What a time window contains")
        "overview_1h_dashboard": lambda: overview_query.overview(
            store, "bench", start=_aligned(now, 60) - 3600, end=_aligned(now, 60), complete_until=now - 15
        ),
        "overview_24h_dashboard": lambda: overview_query.overview(
            store, "bench", start=_aligned(now, 900) - 86_400, end=_aligned(now, 900), complete_until=now - 15
        ),
        "timeseries_24h_by_model_dashboard": lambda: metrics_query.timeseries(
            store, "bench", "cost_usd", _aligned(now, 300) - 86_400, _aligned(now, 300), 300, "model"
        ),
    }
    results = {name: latency(call, repeats) for name, call in cases.items()}
    stored = int(store.query("SELECT count() AS n FROM spans")[0]["n"])
    runs = int(store.query("SELECT count() AS n FROM (SELECT trace_id FROM runs_agg GROUP BY trace_id)")[0]["n"])
    return {
        "spans": stored,
        "runs": runs,
        "fill_s": fill_s,
        "settle_s": settle_s,
        "close_s": close_s,
        "closed_minutes": closed_minutes,
        "load_at_start": load_at_start,
        "load_at_end": os.getloadavg()[0],
        "queries": results,
        "disk": disk_bytes(store, "spans"),
    }


def settle(store: ChdbStore, timeout_s: float = 300) -> float:
    """Wait for the background merges the fill started: a store that took a day of traffic
    merged its parts as they came, so timing queries amid the fill's merges would measure those."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if not store.query("SELECT count() AS n FROM system.merges")[0]["n"]:
            break
        time.sleep(1)
    return time.perf_counter() - started


def _big_trace(store: ChdbStore, now: float) -> str:
    """One run of 10,000 spans, inserted like any other."""
    rng = random.Random(11)
    rows = _trace(rng, int((now - 1800) * 1e9), 10_000)
    store.insert_spans(rows)
    return rows[0].trace_id


SMALL_BATCH = 1  # http_small: one whole trace (one agent run, ~40 spans) a request
SMALL_REQUEST_SPANS = 300_000
LIVE_OVERHEAD_SPANS = 400_000


# --- report ----------------------------------------------------------------------------------
def render(result: dict[str, Any]) -> str:
    lines = [
        "# Storage benchmark (`python -m bench.ingest`)",
        "",
        f"Machine: {result['machine']}",
        "",
    ]
    for key, what in (
        ("http", "with captured text"),
        ("http_no_content", "without captured text"),
        ("http_json_no_content", "without captured text"),
    ):
        if http := result.get(key):
            lines.append(
                f"- HTTP path, agent-like spans {what} (real collector, OTLP/HTTP {http.get('encoding', 'protobuf')}, {http['senders']} senders): "
                f"**{http['spans_per_s']:,.0f} spans/s** from first send until all {http['spans']:,} spans were stored "
                f"({http.get('wire_bytes_per_span', 0):.0f} B/span on the wire, {http['content_bytes_per_span']:.0f} B of it captured text; "
                f"{http['runs_listed']:,} runs listed of {http['traces']:,})"
            )
    if lag := result.get("lag"):
        for cond, what in (
            ("idle", "idle collector"),
            ("idle_sdk", "idle collector, the span ended by the SDK (its export interval included)"),
            ("under_load", "collector ingesting"),
            ("under_load_sdk", "collector ingesting, the span ended by the SDK"),
        ):
            if cond not in lag:
                continue
            fig = lag[cond]
            load = (
                f" at {fig['background_stored_spans_per_s']:,.0f} spans/s"
                if "background_stored_spans_per_s" in fig
                else ""
            )
            lines.append(
                f"- Lag from a span's end to its visibility, {what}{load} ({fig['probes']} probes, a span of a running run): "
                f"run detail **p50 {fig['span_in_run_detail']['p50_ms']:,.0f} ms, p95 {fig['span_in_run_detail']['p95_ms']:,.0f} ms**"
                + (
                    f"; running runs list p50 {listed['p50_ms']:,.0f} ms, p95 {listed['p95_ms']:,.0f} ms"
                    if (listed := fig.get("run_in_running_list"))
                    else ""
                )
                + "".join(
                    f"; {fig[k]['not_seen']} not seen in 30 s ({k})"
                    for k in ("span_in_run_detail", "run_in_running_list")
                    if fig.get(k, {}).get("not_seen")
                )
                + f" (polled every {fig.get('poll_s', 0.05) * 1000:.0f} ms)"
            )
    for key, how in (
        ("live_overhead", "whole runs a batch, as this benchmark sends them"),
        ("live_overhead_late_roots", "every run's root one batch late, as a live SDK sends them"),
    ):
        if ab := result.get(key):
            lines.append(
                f"- Writer's extra work for live runs (`LiveRuns.after_insert`; {how}; {ab['heads_opened']:,} heads opened): "
                f"**{ab['open_us_per_span']:.2f} us/span, {ab['open_share'] * 100:.1f} % of insert + open**; insert + open "
                f"{ab['live_spans_per_s']:,.0f} spans/s against insert alone {ab['plain_spans_per_s']:,.0f} spans/s ({-ab['drop'] * 100:+.1f} %; "
                f"same store, each batch to both in alternating order, {ab['spans']:,} spans each, load average {ab['load_average']:.0f})"
            )
    if small := result.get("http_small_requests"):
        lines.append(
            f"- HTTP path, small requests (one agent run a request, ~{small['spans'] / small['requests']:.0f} spans; "
            f"{small['senders']} senders, no captured text): **{small['requests_per_s']:,.0f} requests/s** "
            f"({small['spans_per_s']:,.0f} spans/s) over {small['requests']:,} requests"
        )
    if store := result.get("store"):
        lines += [
            f"- Store insert (`insert_spans`, batches of {BATCH:,}, no content): **{store['spans_per_s']:,.0f} spans/s** over {store['spans']:,} spans",
            f"- Disk: **{store['bytes_per_span']:.1f} bytes/span** as inserted, {store['bytes_per_span_merged']:.1f} after merges; "
            f"run aggregates add {store['runs_agg_bytes_per_span']:.1f} bytes/span",
        ]
    for key in [k for k in result if k.startswith("query")]:
        q = result[key]
        title = "Queries" if key == "query" else f"`{key}` (see notes)"
        if key.startswith("query_at_"):
            title = (
                f"Checkpoint (filled by SQL at {q['fill_spans_per_s']:,.0f} spans/s since the last one; disk "
                f"{q['disk']['bytes_per_row']:.1f} B/span, {q['disk']['bytes'] / 1e9:.2f} GB)"
            )
        lines += [
            "",
            f"{title} at {q['spans']:,} spans ({q['runs']:,} runs, over 24 h), through `agentwatch_platform.collector.query`:",
            "",
            "| query | p50 ms | p95 ms | CPU p50 ms |",
            "|---|---:|---:|---:|",
            *(
                f"| {name} | {v['p50_ms']:.1f} | {v['p95_ms']:.1f} | {v.get('cpu_p50_ms', float('nan')):.1f} |"
                for name, v in q["queries"].items()
            ),
        ]
        if "close_s" in q:
            lines += [
                "",
                f"Load average {q['load_at_start']:.1f} at the first query, {q['load_at_end']:.1f} at the last; "
                f"the run closer's pass before them wrote {q['closed_minutes']:,} minutes in {q['close_s']:.1f} s.",
            ]
    lines += [
        "",
        "Targets: "
        + (
            ", ".join(f"{k} {'met' if ok else 'MISSED'}" for k, ok in result["targets_met"].items())
            or "none judged by the phases run"
        ),
    ]
    if notes := result.get("notes"):
        lines += ["", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"


def targets_met(result: dict[str, Any]) -> dict[str, bool]:
    """Each target judged on the figures present (a run of some phases into a new file has
    no store or query figures: those targets are not judged, rather than a KeyError)."""
    met: dict[str, bool] = {}
    store, query = result.get("store"), result.get("query")
    # without captured text: the SDK's default (AGENTWATCH_CAPTURE_CONTENT=false)
    if plain := result.get("http_no_content", store):
        met["spans_per_s"] = plain["spans_per_s"] >= TARGETS["spans_per_s"]
    if text := result.get("http", store):
        met["spans_per_s_with_captured_text"] = text["spans_per_s"] >= TARGETS["spans_per_s"]
    if store:
        met["bytes_per_span"] = store["bytes_per_span_merged"] <= TARGETS["bytes_per_span"]
    if query:
        met["overview_p95_ms"] = (
            max(query["queries"][k]["p95_ms"] for k in ("overview_1h", "overview_24h")) < TARGETS["overview_p95_ms"]
        )
    for key in (
        k for k in result if k.startswith("query_at_")
    ):  # issue 19: at 100M spans, overview p95 < 300 ms, a 10k-span trace < 1 s
        figures = result[key]["queries"]
        met[f"{key}_overview_p95_under_300_ms"] = (
            max(figures[k]["p95_ms"] for k in ("overview_1h", "overview_24h")) < 300
        )
        met[f"{key}_trace_10k_spans_p95_under_1_s"] = figures["run_detail_10k_spans"]["p95_ms"] < 1000
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ingest-spans", type=int, default=1_000_000, help="spans for the ingestion phases")
    parser.add_argument("--spans", type=int, default=10_000_000, help="spans in the store for the query phase")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--lag-probes", type=int, default=40, help="probes per condition of the lag phase")
    parser.add_argument(
        "--phases",
        default="http,http_json,http_small,lag,live_overhead,store,query",
        help="comma-separated subset of http, http_json, http_small, lag, live_overhead, store, query; figures of phases not run are kept "
        "from the existing results file",
    )
    parser.add_argument("--no-http", action="store_true", help="skip the phases through the collector's HTTP path")
    parser.add_argument("--out", type=Path, default=RESULTS / "ingest")
    parser.add_argument(
        "--checkpoints",
        type=lambda v: [int(float(x)) for x in v.split(",")],
        default=[],
        help="instead of one query phase at --spans: fill to each count in turn (e.g. 10e6,50e6,100e6) and "
        "measure the queries, disk and fill rate there; the results file is written at each checkpoint",
    )
    parser.add_argument(
        "--store-dir",
        type=Path,
        default=None,
        help="keep the store here (a long run resumes its fill); default a temporary one",
    )
    parser.add_argument(
        "--now",
        type=float,
        default=None,
        help="end of the query phase's ranges and of its fill, epoch seconds (default: the time of the run); "
        "to measure a store filled earlier (--store-dir) where its traffic ends",
    )
    args = parser.parse_args(argv)
    every = {"http", "http_json", "http_small", "lag", "live_overhead", "store", "query"}
    phases = set(args.phases.split(",")) - ({"http", "http_json", "http_small", "lag"} if args.no_http else set())
    if unknown := phases - every:
        parser.error(f"--phases: unknown phase(s) {sorted(unknown)}; choose from {', '.join(sorted(every))}")
    previous = args.out.with_suffix(".json")
    result: dict[str, Any] = json.loads(previous.read_text()) if previous.exists() and phases != every else {}
    result.update(
        {
            "command": " ".join(["python -m bench.ingest", *sys.argv[1:]]),
            "machine": report.machine(),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        # every query figure runs its SQL; --store-dir keeps the store, so a long run resumes its fill
        store = ChdbStore(args.store_dir or Path(tmp) / "chdb", result_cache_s=0)
        store.migrate()
        opened = time.monotonic()
        try:
            if "http" in phases:
                result["http"] = phase_http(args.ingest_spans)
                print("http:", json.dumps(result["http"]))
                result["http_no_content"] = phase_http(args.ingest_spans, content=False)
                print("http_no_content:", json.dumps(result["http_no_content"]))
            if "http_small" in phases:
                result["http_small_requests"] = phase_http(
                    min(args.ingest_spans, SMALL_REQUEST_SPANS), senders=8, content=False, batch_spans=SMALL_BATCH
                )
                print("http_small_requests:", json.dumps(result["http_small_requests"]))
            if "http_json" in phases:
                result["http_json_no_content"] = phase_http(args.ingest_spans, content=False, encoding="json")
                print("http_json_no_content:", json.dumps(result["http_json_no_content"]))
            if "lag" in phases:
                result["lag"] = phase_lag(args.lag_probes, args.ingest_spans)
                print("lag:", json.dumps(result["lag"]))
            if "live_overhead" in phases:
                for late, name in ((False, "live_overhead"), (True, "live_overhead_late_roots")):
                    result[name] = phase_live_overhead(
                        store, min(args.ingest_spans, LIVE_OVERHEAD_SPANS), late_roots=late
                    )
                    print(f"{name}:", json.dumps(result[name]))
            if "store" in phases:
                # Steady state: a collector up for a minute vouches for the keys it stored (RecentKeys).
                time.sleep(max(0.0, opened + store.recent_window_s + 1 - time.monotonic()))
                result["store"] = phase_store(store, args.ingest_spans)
                print("store:", json.dumps(result["store"]))
            if "query" in phases and not args.checkpoints:
                result["query"] = phase_query(store, args.spans, args.repeats, now=args.now)
                print("query:", json.dumps(result["query"]))
            for spans in args.checkpoints:  # a long run, resumable: figures written at each checkpoint
                key = f"query_at_{spans}"
                filled_before = int(store.query("SELECT count() AS n FROM spans")[0]["n"])
                result[key] = phase_query(store, spans, args.repeats, now=args.now)
                result[key]["fill_spans_per_s"] = (spans - filled_before) / max(result[key]["fill_s"], 1e-9)
                print(f"{key}:", json.dumps(result[key]))
                result["targets_met"] = targets_met(result)
                report.write(args.out, result, render(result))
        finally:
            store.close()
    result["targets"] = TARGETS
    result["targets_met"] = targets_met(result)
    result["load_average_at_end"] = os.getloadavg()[0]
    report.write(args.out, result, render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
