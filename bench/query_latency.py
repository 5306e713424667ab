"""Query API latency: every dashboard question, through the store and through HTTP.

    python -m bench.query_latency [--spans 50000] [--repeats 20] [--label after] [--no-http]

For each size in ``--spans`` (comma-separated, e.g. ``50000,1000000``) a fresh chDB store is
filled with ``bench.ingest``'s agent-like runs (30 spans each, generated inside ClickHouse) in
50 inserts over the 35 minutes before now, as a collector that just took ``bench.compare``'s
workload would hold them; one run of 10,000 spans and some feedback are added. Then p50/p95
of each question, first through ``collector.query`` (the store in this process), then through
the real collector's HTTP API (``agentwatch collector`` in a subprocess, a project key).

Results go to ``bench/results/query_latency.json`` (and ``.md``) under ``--label``, so a
``before`` and an ``after`` run sit side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agentwatch_platform.collector.query import cost as cost_query
from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from bench import report
from bench.ingest import SPANS_PER_TRACE, Collector, _big_trace, fill, latency, settle

RESULTS = Path(__file__).parent / "results" / "query_latency"
WINDOW_NS = 35 * 60 * 10**9
INSERTS = 50
PATHS = ("store", "store_cached", "http", "http_moving")
PROJECT = "bench"


def build(data_dir: Path, spans: int) -> dict[str, Any]:
    """A store of ``spans`` spans in ``INSERTS`` inserts; returns what the cases need."""
    store = ChdbStore(data_dir / "chdb")
    store.migrate()
    now = time.time()
    per_insert = max(SPANS_PER_TRACE, spans // INSERTS // SPANS_PER_TRACE * SPANS_PER_TRACE)
    fill(store, spans, end_ns=int(now * 1e9), chunk=per_insert, window_ns=WINDOW_NS)
    big = _big_trace(store, now)
    small = store.query("SELECT trace_id FROM runs_agg WHERE roots > 0 ORDER BY trace_id LIMIT 1")[0]["trace_id"]
    rows = [[PROJECT, small, f"fb{i}", 0.5 + i / 10, "", "", "user", now] for i in range(3)]
    store.insert_rows(
        "feedback", ("project", "trace_id", "feedback_id", "score", "label", "comment", "source", "created_at"), rows
    )
    stored = int(store.query("SELECT count() AS n FROM spans")[0]["n"])
    model = store.query("SELECT toString(model) AS m FROM spans WHERE model != '' LIMIT 1")[0]["m"]
    store.close()
    return {"now": now, "big": big, "small": small, "spans": stored, "model": model}


def cases(info: dict[str, Any]) -> dict[str, tuple[Callable[[Any], Any], str, dict[str, Any]]]:
    """name -> (call on a store, API path, query parameters)."""
    lo, hi = info["now"] - 3600, info["now"]
    w = {"start": lo, "end": hi}
    return {
        "overview_1h": (lambda s: overview_query.overview(s, PROJECT, start=lo, end=hi), "/api/overview", w),
        "runs_list_1h": (lambda s: runs_query.list_runs(s, PROJECT, start=lo, end=hi), "/api/runs", w),
        "runs_list_1h_by_cost": (
            lambda s: runs_query.list_runs(s, PROJECT, start=lo, end=hi, sort="-cost_usd"),
            "/api/runs",
            w | {"sort": "-cost_usd"},
        ),
        "runs_list_1h_search": (
            lambda s: runs_query.list_runs(s, PROJECT, start=lo, end=hi, search="no-such-text"),
            "/api/runs",
            w | {"search": "no-such-text"},
        ),
        "runs_list_1h_tool_failed_by_agent": (
            lambda s: runs_query.list_runs(s, PROJECT, start=lo, end=hi, tool_failed=True, sort="agent"),
            "/api/runs",
            w | {"tool_failed": "true", "sort": "agent"},
        ),
        "run_detail_30_spans": (
            lambda s: runs_query.get_run(s, PROJECT, info["small"]),
            f"/api/runs/{info['small']}",
            {},
        ),
        "run_detail_10k_spans": (lambda s: runs_query.get_run(s, PROJECT, info["big"]), f"/api/runs/{info['big']}", {}),
        "timeseries_1h_by_model": (
            lambda s: metrics_query.timeseries(s, PROJECT, "cost_usd", lo, hi, 60, "model"),
            "/api/timeseries",
            w | {"metric": "cost_usd", "step_s": 60, "group_by": "model"},
        ),
        "overview_1h_by_model": (
            lambda s: overview_query.overview(s, PROJECT, start=lo, end=hi, model=info["model"]),
            "/api/overview",
            w | {"model": info["model"]},
        ),
        "cost_1h": (lambda s: cost_query.cost_breakdown(s, PROJECT, start=lo, end=hi), "/api/cost", w),
        "filters_1h": (lambda s: runs_query.filters(s, PROJECT, start=lo, end=hi), "/api/filters", w),
    }


def measure_store(data_dir: Path, info: dict[str, Any], repeats: int, *, result_cache_s: float) -> dict[str, Any]:
    """Each question repeated through ``collector.query``; ``result_cache_s`` = 0: every call runs its SQL."""
    store = ChdbStore(data_dir / "chdb", result_cache_s=result_cache_s)
    try:
        settle(store)
        return {name: latency(lambda c=call: c(store), repeats) for name, (call, _, _) in cases(info).items()}
    finally:
        store.close()


def measure_http(data_dir: Path, info: dict[str, Any], repeats: int) -> dict[str, dict[str, Any]]:
    """``http``: the same request repeated (as ``bench.compare`` asks it); ``http_moving``: the
    window's end moves by a millisecond each call (a dashboard asking about "now"), so no
    answer can come from the result cache. Run detail has no window and is left out there."""
    out: dict[str, dict[str, Any]] = {"http": {}, "http_moving": {}}
    with Collector(data_dir) as collector:
        headers = {"Authorization": f"Bearer {collector.key(PROJECT)}"}
        with httpx.Client(base_url=collector.url, headers=headers, timeout=60) as client:
            for name, (_, path, params) in cases(info).items():
                out["http"][name] = latency(lambda p=path, q=params: _get(client, p, q), repeats)
                if "end" in params:
                    out["http_moving"][name] = latency(_moving(client, path, params), repeats)
    return out


def _moving(client: httpx.Client, path: str, params: dict[str, Any]) -> Callable[[], None]:
    """A call whose window ends a millisecond later each time."""
    moved = iter(range(1, 10**9))
    return lambda: _get(client, path, params | {"end": params["end"] + next(moved) / 1e3})


def _get(client: httpx.Client, path: str, params: dict[str, Any]) -> None:
    client.get(path, params=params).raise_for_status()


def run_size(spans: int, repeats: int, *, http: bool, cached: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="aw-qlat-") as tmp:
        data_dir = Path(tmp)
        started = time.perf_counter()
        info = build(data_dir, spans)
        result: dict[str, Any] = {"spans": info["spans"], "build_s": round(time.perf_counter() - started, 1)}
        result["store"] = measure_store(data_dir, info, repeats, result_cache_s=0)
        if cached:
            result["store_cached"] = measure_store(data_dir, info, repeats, result_cache_s=10)
        if http:
            result |= measure_http(data_dir, info, repeats)
        print(f"{spans}:", json.dumps(result), flush=True)
        return result


def render(results: dict[str, Any]) -> str:
    lines = ["# Query API latency (`python -m bench.query_latency`)", ""]
    for label, run in results.items():
        lines += [f"## {label}", "", f"Command: `{run['command']}`  ", f"Machine: {run['machine']}", ""]
        for size, res in run["sizes"].items():
            paths = [p for p in PATHS if p in res]
            lines += [
                f"{int(size):,} spans ({res['spans']:,} stored):",
                "",
                "| question | " + " | ".join(f"{p} p50 ms | {p} p95 ms" for p in paths) + " |",
            ]
            lines += ["|---|" + "---:|---:|" * len(paths)]
            for name in res["store"]:
                lines.append(f"| {name} | " + " | ".join(_cell(res[p].get(name)) for p in paths) + " |")
            lines.append("")
    lines += [
        "`store`: `agentwatch_platform.collector.query` in-process, result cache off (every call plans and runs its SQL); `store_cached`: the same",
        "with the chDB store's result cache (repeats between two writes are served from memory); `http`: the real collector,",
        "the same request repeated (as `bench.compare` asks); `http_moving`: the window's end moves by 1 ms each call (a dashboard",
        "asking about now), so only statements that do not read the end (per-minute rollups) can come from the cache.",
        "",
    ]
    return "\n".join(lines)


def _cell(figure: dict[str, Any] | None) -> str:
    return f"{figure['p50_ms']:.1f} | {figure['p95_ms']:.1f}" if figure else "- | -"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", default="50000", help="comma-separated store sizes, e.g. 50000,1000000")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--label", default="after", help="key of this run in the results file (e.g. before, after)")
    parser.add_argument("--no-http", action="store_true", help="measure through the store only")
    parser.add_argument(
        "--no-cache", action="store_true", help="skip the store phase with the result cache on (a build without one)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    run = {
        "command": " ".join(["python -m bench.query_latency", *sys.argv[1:]]),
        "machine": report.machine(),
        "sizes": {
            size: run_size(int(size), args.repeats, http=not args.no_http, cached=not args.no_cache)
            for size in args.spans.split(",")
        },
    }
    run["load_average_at_end"] = os.getloadavg()[0]
    path = args.out.with_suffix(".json")
    results = json.loads(path.read_text()) if path.exists() else {}
    results[args.label] = run
    report.write(args.out, results, render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
