"""How long the dashboard's pages take to render over a full store (``python -m bench.dashboard_render``).

Fills a chDB store with ``--spans`` agent-like spans over 24 hours plus one run of 10,000
spans (``bench.ingest``'s generators), starts the real collector on it, and times the
dashboard's script runs (Streamlit's AppTest: every query the page makes through the API,
plus building its charts and tables) with the query cache cleared before each run, so each
figure is a first look, not a cached one. Targets: the overview under 2 s with 1M spans
stored, the run detail of a 10,000-span run under 2 s. Browser paint time is not included.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit.testing.v1 import AppTest

from bench import report
from bench.ingest import Collector, _big_trace, fill
from collector.storage.chdb_store import ChdbStore
from dashboard.client import CollectorClient
from dashboard.overview_spec import CHARTS as OVERVIEW_CHARTS

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"
RESULTS = Path(__file__).resolve().parent / "results"
TARGET_MS = 2000.0
PAGES = {  # case -> (page, time range, query parameters)
    "overview_1h": ("views/overview.py", "Last hour", {}),
    "overview_24h": ("views/overview.py", "Last 24 hours", {}),
    "runs_24h": ("views/runs.py", "Last 24 hours", {}),
    "cost_24h": ("views/cost.py", "Last 24 hours", {}),
    "run_detail_10k_spans": ("views/run_detail.py", "Last hour", {"trace_id": ""}),
}


def prepare(data_dir: Path, spans: int) -> tuple[str, float]:
    """Fill the store before the collector owns it; returns the 10,000-span run's trace id."""
    store = ChdbStore(data_dir / "chdb")
    store.migrate()
    try:
        now = time.time()
        fill_s = fill(store, spans, end_ns=int(now * 1e9))
        return _big_trace(store, now), fill_s
    finally:
        store.close()


def time_page(app: AppTest, page: str, time_range: str, query: dict[str, str], repeats: int) -> dict[str, Any]:
    app.session_state["aw_range"] = time_range
    app.query_params.update(query)
    times = []
    for _ in range(repeats + 1):  # the first run also imports the page's modules: not counted
        st.cache_data.clear()
        started = time.perf_counter()
        app.switch_page(page).run()
        times.append((time.perf_counter() - started) * 1000)
        if app.exception or app.error:
            raise RuntimeError(f"{page}: {[e.value for e in app.exception or app.error]}")
    times = sorted(times[1:])
    return {"p50_ms": statistics.median(times), "max_ms": times[-1], "repeats": repeats}


def run(spans: int, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        big, fill_s = prepare(data_dir, spans)
        with Collector(data_dir) as collector:
            os.environ.update(AGENTWATCH_COLLECTOR_URL=collector.url, AGENTWATCH_API_KEY=collector.key("bench"), AGENTWATCH_DASHBOARD_OPEN="1")
            app = AppTest.from_file(str(APP), default_timeout=120).run()
            cases = {}
            api = api_breakdown(collector.url, os.environ["AGENTWATCH_API_KEY"])
            print("api", json.dumps(api), flush=True)
            for name, (page, time_range, query) in PAGES.items():
                try:
                    cases[name] = time_page(app, page, time_range, {k: v or big for k, v in query.items()}, repeats)
                except RuntimeError as exc:  # a page that failed is a result too
                    cases[name] = {"p50_ms": float("nan"), "max_ms": float("nan"), "error": str(exc)}
                print(name, json.dumps(cases[name]), flush=True)
    return {"spans": spans, "fill_s": round(fill_s, 1), "pages": cases, "overview_24h_api_ms": api}


def api_breakdown(url: str, key: str) -> dict[str, float]:
    """Each query the overview makes over 24 h, one at a time (which one dominates the page)."""
    now = time.time()
    window = {"start": now - 86_400, "end": now}
    calls = {"overview": lambda c: c.overview(**window)}
    for charts_ in OVERVIEW_CHARTS.values():
        for _, metrics, group_by, _ in charts_:
            for metric in metrics:
                calls[f"timeseries {metric} by {group_by}"] = lambda c, m=metric, g=group_by: c.timeseries(m, step_s=900, group_by=g, **window)
    timings = {}
    with CollectorClient(url, key, timeout_s=120) as client:
        for name, call in calls.items():
            started = time.perf_counter()
            call(client)
            timings[name] = round((time.perf_counter() - started) * 1000, 1)
    return timings


def render(result: dict[str, Any]) -> str:
    lines = [
        "# Dashboard render benchmark (`python -m bench.dashboard_render`)", "",
        f"Machine: {result['machine']}", "",
        f"Store: {result['spans']:,} spans over 24 h plus one run of 10,000 spans; times are Streamlit script runs",
        "(every API query of the page, charts and tables built), query cache cleared before each run; browser paint excluded.", "",
        "| page | p50 ms | max ms |", "|---|---:|---:|",
    ]
    lines += [f"| {name} | {r['p50_ms']:.0f} | {r['max_ms']:.0f} |" + (f" {r['error']}" if "error" in r else "") for name, r in result["pages"].items()]
    api = result.get("overview_24h_api_ms", {})
    lines += ["", "The overview's queries over 24 h, one at a time (ms): " + ", ".join(f"{k} {v:.0f}" for k, v in api.items())]
    lines += ["", f"Targets (< {TARGET_MS:.0f} ms p50): " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in result["targets_met"].items()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=1_000_000, help="spans in the store (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "dashboard_render")
    args = parser.parse_args(argv)
    result = {"command": " ".join(["python -m bench.dashboard_render", *sys.argv[1:]]), "machine": report.machine(), **run(args.spans, args.repeats)}
    result["targets_met"] = {k: result["pages"][k]["p50_ms"] < TARGET_MS for k in ("overview_1h", "overview_24h", "run_detail_10k_spans")}
    result["load_average_at_end"] = os.getloadavg()[0]
    report.write(args.out, result, render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
