"""The span explorer's latency: groups and filtered lists over every span of a day.

    python -m bench.span_explorer [--spans 1000000] [--repeats 15] [--label after] [--store-dir DIR] [--spans-only]

A fresh chDB store is filled with ``bench.ingest``'s agent-like runs (30 spans each, generated
inside ClickHouse: a run, steps, LLM calls, tool calls of which 10 % fail) spread over the 24 hours
before now, in 50 inserts. Then p50/p95 (wall) and the median CPU of each question through
``collector.query.spans`` in this process, the store's result cache off, over the whole 24 hours.

Results go to ``bench/results/span_explorer.json`` (and ``.md``) under ``--label``. With ``--store-dir``
the store stays there and a later run measures it again without refilling (its window is the fill's day),
after applying the migrations since its fill. ``--spans-only`` answers every question from the spans, the
rollups (``span_key_minutes``/``span_key_hours``) unread: the figures before them, on the same store.
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

from agentwatch_platform.collector.query import spans as query
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from bench import report
from bench.ingest import SPANS_PER_TRACE, fill, latency, settle

RESULTS = Path(__file__).parent / "results" / "span_explorer"
DAY_S = 86_400
INSERTS = 50
PROJECT = "bench"


def build(data_dir: Path, spans: int) -> dict[str, Any]:
    """A store of ``spans`` spans over the day before now; the window the cases ask about."""
    store = ChdbStore(data_dir / "chdb")
    store.migrate()
    now = time.time()
    per_insert = max(SPANS_PER_TRACE, spans // INSERTS // SPANS_PER_TRACE * SPANS_PER_TRACE)
    fill(store, spans, end_ns=int(now * 1e9), chunk=per_insert, window_ns=(DAY_S - 300) * 10**9)
    stored = int(store.query("SELECT count() AS n FROM spans")[0]["n"])
    store.close()
    return {"spans": stored, "start": now - DAY_S, "end": now + 60}


Case = Callable[[ChdbStore], Any]


def cases(info: dict[str, Any], *, rollups: bool = True) -> dict[str, Case]:
    w = {"start": info["start"], "end": info["end"], "rollups": rollups}
    groups, spans = query.span_groups, query.list_spans
    return {
        "failures_by_tool_24h": lambda s: groups(s, PROJECT, **w, by="tool", kind="tool", sort="-failures"),
        "failures_by_error_type_24h": lambda s: groups(s, PROJECT, **w, by="error_type", sort="-spans"),
        "cost_by_model_24h": lambda s: groups(s, PROJECT, **w, by="model", sort="-cost_usd"),
        "cost_by_user_24h": lambda s: groups(s, PROJECT, **w, by="user", sort="-cost_usd"),
        "cost_by_step_24h": lambda s: groups(s, PROJECT, **w, by="step", sort="-cost_usd"),
        "failed_tools_by_duration_24h": lambda s: spans(
            s, PROJECT, **w, kind="tool", failed=True, sort="-duration_s", limit=50
        ),
        "llm_calls_by_cost_24h": lambda s: spans(s, PROJECT, **w, kind="llm", model="sim-large", sort="-cost_usd"),
        "latest_spans_24h": lambda s: spans(s, PROJECT, **w, limit=50),
    }


def measure(data_dir: Path, info: dict[str, Any], repeats: int, *, rollups: bool = True) -> dict[str, Any]:
    store = ChdbStore(data_dir / "chdb", result_cache_s=0)
    try:
        store.migrate()  # a kept store gains the migrations since its fill (their backfills included)
        settle(store)
        return {name: latency(lambda c=call: c(store), repeats) for name, call in cases(info, rollups=rollups).items()}
    finally:
        store.close()


def kept(data_dir: Path, spans: int) -> tuple[dict[str, Any], float]:
    """The store in ``data_dir`` and its window (``window.json``), filled first if it has none: a
    10M-span fill takes minutes, so a second measurement (before and after a change) reuses it."""
    saved = data_dir / "window.json"
    if saved.exists():
        info = json.loads(saved.read_text())
        if info["asked"] != spans:
            raise SystemExit(
                f"{data_dir} holds a store of {info['asked']:,} spans, not {spans:,}: use another --store-dir"
            )
        return info, info["build_s"]
    started = time.perf_counter()
    info = build(data_dir, spans) | {"asked": spans}
    info["build_s"] = round(time.perf_counter() - started, 1)
    saved.write_text(json.dumps(info))
    return info, info["build_s"]


def run_size(spans: int, repeats: int, store_dir: Path | None = None, *, rollups: bool = True) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="aw-spanx-") as tmp:
        data_dir = store_dir or Path(tmp)
        data_dir.mkdir(parents=True, exist_ok=True)
        info, build_s = kept(data_dir, spans)
        result: dict[str, Any] = {
            "spans": info["spans"],
            "build_s": build_s,
            "load_average_at_start": os.getloadavg()[0],
        }
        result["store"] = measure(data_dir, info, repeats, rollups=rollups)
        print(f"{spans}:", json.dumps(result), flush=True)
        return result


# The bar: a span group-by (failures by tool over 24 h) and a filtered span list, p95 under 1 s.
TARGET_MS = 1000.0
TARGET_CASES = ("failures_by_tool_24h", "failed_tools_by_duration_24h", "llm_calls_by_cost_24h")


def _target(res: dict[str, Any]) -> list[str]:
    load = (
        f"Load average (1 min) at the start: {res['load_average_at_start']:.1f}. "
        if "load_average_at_start" in res
        else ""
    )
    worst = max(res["store"][name]["p95_ms"] for name in TARGET_CASES if name in res["store"])
    verdict = "met" if worst < TARGET_MS else "MISSED"
    return [f"{load}Target p95 < 1 s for failures by tool and the filtered lists: {verdict} (worst {worst:.0f} ms)."]


def render(results: dict[str, Any]) -> str:
    lines = ["# Span explorer latency (`python -m bench.span_explorer`)", ""]
    for label, run in results.items():
        lines += [f"## {label}", "", f"Command: `{run['command']}`  ", f"Machine: {run['machine']}", ""]
        for size, res in run["sizes"].items():
            lines += [
                f"{int(size):,} spans ({res['spans']:,} stored) over 24 h, the whole day asked:",
                "",
                "| question | p50 ms | p95 ms | CPU p50 ms |",
                "|---|---:|---:|---:|",
            ]
            for name, fig in res["store"].items():
                lines.append(f"| {name} | {fig['p50_ms']:.1f} | {fig['p95_ms']:.1f} | {fig['cpu_p50_ms']:.1f} |")
            lines += ["", *_target(res), ""]
        if "load_average_at_end" in run:
            lines += [f"Load average (1 min) at the end: {run['load_average_at_end']:.1f}.", ""]
    lines += [
        "Through `agentwatch_platform.collector.query.spans` in-process, the chDB store's result cache off: every call",
        "plans and runs its SQL. A list is its page and its count (two statements) and its runs' look-up.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", default="1000000", help="comma-separated store sizes")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--label", default="after")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--store-dir", type=Path, help="keep the store here (one size) and reuse it on the next run")
    parser.add_argument(
        "--spans-only",
        action="store_true",
        help="answer from the spans alone, the rollups unread (the figures before them)",
    )
    args = parser.parse_args(argv)
    sizes = args.spans.split(",")
    if args.store_dir and len(sizes) > 1:
        parser.error("--store-dir keeps one store: give one --spans size")
    run = {
        "command": " ".join(["python -m bench.span_explorer", *(argv if argv is not None else sys.argv[1:])]),
        "machine": report.machine(),
        "sizes": {
            size: run_size(int(size), args.repeats, args.store_dir, rollups=not args.spans_only) for size in sizes
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
