"""Soak test: many simulated agents for a long time through the reference stack.

    .venv/bin/python bench/soak.py            # 200 agents, ten minutes
    .venv/bin/python bench/soak.py --quick    # 200 agents, one minute

The real collector (``agentwatch collector``, chDB in a temporary data dir) and the simulated
engine (a simulation of a vLLM-like server) run as processes; this process runs the research
agent for ``--agents`` concurrent users (``reference_agent.loadgen``), instrumented by the SDK.
It reports spans/s, the latency of the export requests (OpenTelemetry's OTLP/HTTP exporter
on the SDK's batch worker, ``agentwatch.init(exporter=...)``) as the collector answers them
(p50/p99), the collector's RSS over time with a fitted slope (MB per minute: no growth trend
means a slope near zero), spool depth and queue, and spans lost: spans the SDK counts as
exported minus distinct spans stored (must be zero), plus duplicates stored and SDK-side drops.
Results go to ``bench/results/soak.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import agentwatch
import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentwatch_platform.collector.storage.chdb_store import ChdbStore  # noqa: E402
from agentwatch_platform.reference_agent.agent import AgentConfig, ResearchAgent, make_client  # noqa: E402
from agentwatch_platform.reference_agent.keys import project_key  # noqa: E402
from agentwatch_platform.reference_agent.loadgen import LoadConfig, generate_load  # noqa: E402
from agentwatch_platform.reference_agent.supervisor import ProcessGroup, start_collector, start_engine  # noqa: E402
from agentwatch_platform.reference_agent.tools import Corpus, ResearchTools, ToolCache, ToolConfig  # noqa: E402
from bench.ports import free_port  # noqa: E402

SERVICE = "soak-agent"
RESULTS = ROOT / "bench" / "results"


@dataclass
class Sample:
    t_s: float
    rss_mb: float
    spool_bytes: float
    queued_spans: float
    stored_spans: float


@dataclass
class Report:
    agents: int
    duration_s: float
    engine_speed: float
    runs: int
    runs_failed: int
    spans_exported: int
    spans_dropped_by_sdk: int
    spans_failed_by_sdk: int
    spans_stored: int
    spans_lost: int
    spans_duplicated: int
    spans_per_s: float  # exported spans / wall time from the first run to the last span flushed
    export_requests: int
    export_p50_ms: float
    export_p99_ms: float
    rss_start_mb: float
    rss_max_mb: float
    rss_end_mb: float
    rss_slope_mb_per_min: float
    spool_max_bytes: float
    queued_max_spans: float
    samples: list[Sample] = field(default_factory=list)


class TimedExporter(SpanExporter):
    """The OpenTelemetry OTLP/HTTP exporter to the collector, timing every export request; given to
    ``agentwatch.init(exporter=...)``, so the SDK's bounded batch worker drives it (public surface only)."""

    def __init__(self, collector: str, key: str) -> None:
        self.durations: list[float] = []
        self._lock = threading.Lock()
        self._otlp = OTLPSpanExporter(
            endpoint=collector.rstrip("/") + "/v1/traces", headers={"Authorization": f"Bearer {key}"}, timeout=10
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        started = time.perf_counter()
        try:
            return self._otlp.export(spans)
        finally:
            self._record(time.perf_counter() - started)

    def shutdown(self) -> None:
        self._otlp.shutdown()

    def _record(self, seconds: float) -> None:
        with self._lock:
            self.durations.append(seconds)

    def quantile(self, q: float) -> float:
        ordered = sorted(self.durations)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


class Sampler(threading.Thread):
    """Every ``period`` seconds: the collector's RSS, spool bytes, queued and stored spans."""

    def __init__(self, url: str, pid: int, period: float) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.url, self.pid, self.period = url, pid, period
        self.samples: list[Sample] = []
        self._halt = threading.Event()
        self._t0 = time.monotonic()

    def run(self) -> None:
        while not self._halt.wait(self.period):
            try:
                self.samples.append(self.sample())
            except (OSError, httpx.HTTPError, ValueError) as exc:
                print(f"  sampler: {exc}", file=sys.stderr)

    def sample(self) -> Sample:
        metrics = _metrics(httpx.get(self.url + "/metrics", timeout=10).text)
        return Sample(
            round(time.monotonic() - self._t0, 1),
            _rss_mb(self.pid),
            metrics.get("agentwatch_collector_spool_bytes", 0.0),
            metrics.get("agentwatch_collector_queued_spans", 0.0),
            metrics.get("agentwatch_collector_flushed_spans_total", 0.0),
        )

    def stop(self) -> None:
        self._halt.set()
        self.join(30)


def _metrics(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, value = line.split()[:2]
            out[name] = float(value)
    return out


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for pid {pid}")


def _slope(samples: list[Sample]) -> float:
    """Least-squares slope of RSS (MB) per minute after the first third (start-up and ramp-up)."""
    tail = samples[len(samples) // 3 :]
    if len(tail) < 3:
        return 0.0
    return statistics.linear_regression([s.t_s / 60 for s in tail], [s.rss_mb for s in tail]).slope


def _stored(data_dir: Path) -> tuple[int, int]:
    """(rows, distinct span ids) of the soak's spans, read from the store after the collector stopped."""
    store = ChdbStore(data_dir / "chdb")
    try:
        row = store.query(
            "SELECT count() AS n, uniqExact(trace_id, span_id) AS u FROM spans WHERE service_name = {s:String}",
            {"s": SERVICE},
        )[0]
    finally:
        store.close()
    return int(row["n"]), int(row["u"])


async def _load(engine: str, agents: int, duration_s: float) -> tuple[int, int]:
    client = make_client(engine + "/v1", "soak")
    corpus, cache = Corpus.load(), ToolCache()
    tools = ResearchTools(corpus, ToolConfig(latency_s=0.02, failure_rate=0.05, timeout_rate=0.01, seed=1))
    agent = ResearchAgent(client, tools, config=AgentConfig(), cache=cache, seed=1)
    summary = await generate_load(
        agent, LoadConfig(users=agents, runs=10_000_000, duration_s=duration_s, think_time_s=0.5)
    )
    return summary.runs, summary.failed


def soak(agents: int, duration_s: float, engine_speed: float, work: Path) -> Report:
    group = ProcessGroup(work / "logs", log=print)
    try:
        data = work / "data"
        collector = start_collector(
            group,
            data,
            port=free_port(),
            grpc_port=0,
            env={"AGENTWATCH_ALERT_INTERVAL_S": "0", "AGENTWATCH_RATE_LIMIT_SPANS_PER_S": "0"},
        )
        pid = group._children[0][1].pid
        key = project_key(collector, data, "soak")
        engine = start_engine(group, port=free_port(), speed=engine_speed)
        group.wait_ready("engine", engine + "/metrics")
        timer = TimedExporter(collector, key)
        agentwatch.init(service_name=SERVICE, max_queue_size=200_000, exporter=timer)
        sampler = Sampler(collector, pid, period=max(1.0, duration_s / 120))
        sampler.start()
        before = agentwatch.stats()
        started = time.monotonic()
        runs, failed = asyncio.run(_load(engine, agents, duration_s))
        flushed = agentwatch.force_flush(timeout_s=120)
        elapsed = time.monotonic() - started
        after = agentwatch.stats()
        time.sleep(3)  # the collector's last flush
        sampler.samples.append(sampler.sample())
        sampler.stop()
        agentwatch.shutdown()
        if not flushed:
            print("warning: the SDK could not flush everything", file=sys.stderr)
    finally:
        group.stop()
    rows, distinct = _stored(data)
    exported = after["spans_exported"] - before["spans_exported"]
    samples = sampler.samples
    return Report(
        agents=agents,
        duration_s=round(elapsed, 1),
        engine_speed=engine_speed,
        runs=runs,
        runs_failed=failed,
        spans_exported=exported,
        spans_dropped_by_sdk=after["spans_dropped"] - before["spans_dropped"],
        spans_failed_by_sdk=after["spans_failed"] - before["spans_failed"],
        spans_stored=distinct,
        spans_lost=exported - distinct,
        spans_duplicated=rows - distinct,
        spans_per_s=round(exported / elapsed, 1),
        export_requests=len(timer.durations),
        export_p50_ms=round(timer.quantile(0.5), 1),
        export_p99_ms=round(timer.quantile(0.99), 1),
        rss_start_mb=round(samples[0].rss_mb, 1),
        rss_max_mb=round(max(s.rss_mb for s in samples), 1),
        rss_end_mb=round(samples[-1].rss_mb, 1),
        rss_slope_mb_per_min=round(_slope(samples), 2),
        spool_max_bytes=max(s.spool_bytes for s in samples),
        queued_max_spans=max(s.queued_spans for s in samples),
        samples=samples,
    )


def _markdown(report: Report) -> str:
    figures = {k: v for k, v in asdict(report).items() if k != "samples"}
    lines = [
        "# Soak: simulated agents through the reference stack",
        "",
        "The LLM engine is a simulation (`agentwatch engine --sim`). Collector: embedded chDB.",
        "",
        "| figure | value |",
        "|---|---|",
    ]
    lines += [f"| {name} | {value} |" for name, value in figures.items()]
    lines += [
        "",
        "RSS of the collector over time (MB): "
        + ", ".join(f"{s.t_s:.0f}s={s.rss_mb:.0f}" for s in report.samples[:: max(1, len(report.samples) // 12)]),
    ]
    verdict = "PASS" if report.spans_lost == 0 and report.spans_duplicated == 0 else "FAIL"
    lines += ["", f"**{verdict}**: {report.spans_lost} spans lost, {report.spans_duplicated} duplicated."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=200, help="concurrent simulated users (default 200)")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    parser.add_argument("--quick", action="store_true", help="one minute instead of ten")
    parser.add_argument(
        "--engine-speed", type=float, default=20.0, help="simulated engine speed-up over real time (default 20)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "soak", help="results path without suffix")
    args = parser.parse_args(argv)
    duration = 60.0 if args.quick else args.duration
    with tempfile.TemporaryDirectory(prefix="agentwatch-soak-") as work:
        report = soak(args.agents, duration, args.engine_speed, Path(work))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    args.out.with_suffix(".md").write_text(_markdown(report))
    print(_markdown(report))
    return 0 if report.spans_lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
