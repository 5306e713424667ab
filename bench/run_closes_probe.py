"""What per-run close rows (``run_closes``, not built) would save a day's overview, measured on a store.

    python -m bench.run_closes_probe --store-dir COPY_OF_A_STORE [--now EPOCH_S] [--repeats 8]

The overview's per-run totals (``sql.metrics.run_totals``: steps per run, max steps, max run cost,
feedback) group every ``runs_agg`` partial of the range by trace. The design measured here, and
left unbuilt (bench/results/scale_100m.md, "run_closes"), writes one row per finished run instead:
the writer closes the runs whose root it stored, from ``runs_agg``. This probe times, on a COPY of
a filled store (it adds and drops ``x_run_closes`` there):

- today's statement for a day's overview (two buckets of 24 h), its GROUP BY, and the bare scan;
- the same figures from close rows (a ReplacingMergeTree, one row per run, read with FINAL so a run
  closed again by a late span or by two collectors counts once), in ten overlapping parts (rows just
  written) and merged;
- how many minutes a completeness check passes (close rows per minute = ``run_minutes`` heads);
- what a writer would pay per batch: closing the traces of the last 20k spans from ``runs_agg``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.sql import metrics as metrics_sql
from bench import report

RESULTS = Path(__file__).parent / "results" / "run_closes_probe"
DAY_S = 86_400
PARTS = 10

CLOSES = """
CREATE TABLE x_run_closes (project LowCardinality(String), minute DateTime, trace_id String, start_ns Int64,
    agent LowCardinality(String), run_steps UInt64, run_cost Float64, version UInt64)
ENGINE = ReplacingMergeTree(version) ORDER BY (project, minute, trace_id)"""
# One close row per rooted trace, as run_totals merges it (all hours: the probe's store is one day).
_CLOSE_ROWS = """
SELECT project, toDateTime(intDiv(start_ns, 60000000000) * 60) AS minute, trace_id, start_ns, agent, run_steps, run_cost, 1
FROM (SELECT project, trace_id, toUnixTimestamp64Nano(min(start_time)) AS start_ns, max(agent) AS agent,
        if(sum(steps) > 0, sum(steps), sum(llm_calls)) AS run_steps, sum(cost_usd) AS run_cost
    FROM runs_agg GROUP BY project, trace_id HAVING sum(roots) > 0)
WHERE cityHash64(trace_id) % {parts:UInt32} = {part:UInt32}"""
FROM_CLOSES = """
SELECT intDiv(start_ns - {start_ns:Int64}, {step_ns:Int64}) AS bucket, count() AS runs, avg(run_steps) AS steps_per_run,
    max(run_steps) AS max_steps, max(run_cost) AS max_run_cost_usd
FROM x_run_closes FINAL
WHERE project = {project:String} AND minute >= toDateTime(intDiv({start_ns:Int64}, 60000000000) * 60)
  AND minute < toDateTime({end_ns:Int64} / 1000000000) AND start_ns >= {start_ns:Int64} AND start_ns < {end_ns:Int64}
GROUP BY bucket"""
CHECK = """
SELECT countIf(c.n = h.n) AS complete, count() AS minutes FROM
  (SELECT minute, count() AS n FROM x_run_closes FINAL WHERE project = {project:String}
      AND minute >= toDateTime({start_ns:Int64} / 1000000000) AND minute < toDateTime({end_ns:Int64} / 1000000000)
   GROUP BY minute) AS c
  FULL JOIN (SELECT minute, sum(runs) AS n FROM run_minutes WHERE project = {project:String}
      AND minute >= toDateTime({start_ns:Int64} / 1000000000) AND minute < toDateTime({end_ns:Int64} / 1000000000)
   GROUP BY minute) AS h USING minute"""
_WINDOW = """project = {project:String} AND hour >= toStartOfHour(fromUnixTimestamp64Nano({start_ns:Int64}))
    AND hour < fromUnixTimestamp64Nano({end_ns:Int64}) + INTERVAL 1 DAY"""  # the hours run_totals reads
GROUP_ONLY = f"SELECT count() AS n FROM (SELECT trace_id FROM runs_agg WHERE {_WINDOW} GROUP BY trace_id)"
SCAN_ONLY = (
    f"SELECT sum(steps), sum(llm_calls), sum(cost_usd), min(start_time), sum(roots) FROM runs_agg WHERE {_WINDOW}"
)
BATCH_TRACES = """
SELECT DISTINCT trace_id FROM (SELECT trace_id FROM spans WHERE project = {project:String}
    AND start_time >= fromUnixTimestamp64Nano({end_ns:Int64} - 3600000000000) AND start_time < fromUnixTimestamp64Nano({end_ns:Int64})
    ORDER BY start_time DESC LIMIT 20000)"""
CLOSE_BATCH = """
SELECT trace_id, min(start_time) AS start_t, if(sum(steps) > 0, sum(steps), sum(llm_calls)) AS run_steps, sum(cost_usd) AS cost
FROM runs_agg
WHERE project = {project:String} AND hour >= toStartOfHour(fromUnixTimestamp64Nano({end_ns:Int64})) - INTERVAL 1 DAY
  AND trace_id IN {trace_ids:Array(String)}
GROUP BY trace_id HAVING sum(roots) > 0"""


def timed(store: ChdbStore, sql: str, params: dict[str, Any], repeats: int) -> dict[str, float]:
    """Median CPU (``process_time``: chDB's threads included) and wall, in ms, after one warm-up."""
    cpu, wall = [], []
    for i in range(repeats + 1):
        c, w = time.process_time(), time.perf_counter()
        store.query(sql, params)
        if i:
            cpu.append((time.process_time() - c) * 1000)
            wall.append((time.perf_counter() - w) * 1000)
    return {"cpu_ms": round(statistics.median(cpu), 1), "wall_ms": round(statistics.median(wall), 1)}


def same_figures(store: ChdbStore, params: dict[str, Any]) -> bool:
    """Whether the close rows give run_totals' figures (steps per run, max steps, max run cost) per bucket."""
    fields = ("steps_per_run", "max_steps", "max_run_cost_usd")
    today = {r["bucket"]: r for r in store.query(metrics_sql.run_totals("none", "1"), params | {"agent": None})}
    closes = {r["bucket"]: r for r in store.query(FROM_CLOSES, params)}
    return today.keys() == closes.keys() and all(
        math.isclose(today[b][f], closes[b][f], rel_tol=1e-9) for b in today for f in fields
    )


def probe(store: ChdbStore, now: float, repeats: int) -> dict[str, Any]:
    end_ns = int(now * 1e9)
    params = {"project": "bench", "start_ns": end_ns - 2 * DAY_S * 10**9, "end_ns": end_ns, "step_ns": DAY_S * 10**9}
    out: dict[str, Any] = {"today": {}, "closes": {}}
    out["today"]["run_totals"] = timed(store, metrics_sql.run_totals("none", "1"), params | {"agent": None}, repeats)
    out["today"]["group_by_trace_only"] = timed(store, GROUP_ONLY, params, repeats)
    out["today"]["scan_only"] = timed(store, SCAN_ONLY, params, repeats)
    store.command("DROP TABLE IF EXISTS x_run_closes")
    store.command(CLOSES)
    for part in range(PARTS):  # parts that all overlap in key ranges: the worst case before merges
        store.command(f"INSERT INTO x_run_closes {_CLOSE_ROWS}", {"parts": PARTS, "part": part})
    out["closes"]["final_10_overlapping_parts"] = timed(store, FROM_CLOSES, params, repeats)
    store.command("OPTIMIZE TABLE x_run_closes FINAL")
    out["closes"]["final_merged"] = timed(store, FROM_CLOSES, params, repeats)
    out["closes"]["same_figures"] = same_figures(store, params)
    out["closes"]["completeness_check"] = timed(store, CHECK, params, repeats)
    out["closes"]["minutes_complete"] = store.query(CHECK, params)[0]
    out["closes"]["rows"] = int(store.query("SELECT count() AS n FROM x_run_closes")[0]["n"])
    store.command("DROP TABLE x_run_closes")
    ids = [r["trace_id"] for r in store.query(BATCH_TRACES, params)]
    out["close_per_batch"] = {"traces": len(ids)} | timed(store, CLOSE_BATCH, params | {"trace_ids": ids}, repeats)
    return out


def render(result: dict[str, Any]) -> str:
    lines = [
        "# run_closes probe (`python -m bench.run_closes_probe`)",
        "",
        f"Store {result['store']}, ranges ending at {result['now']}; {result['machine']}, "
        f"load {result['load_at_end']:.1f} at end.",
        "",
        "| statement (overview_24h: 48 h, two buckets) | CPU ms | wall ms |",
        "|---|---:|---:|",
    ]
    for group in ("today", "closes"):
        lines += [
            f"| {group}: {name} | {v['cpu_ms']} | {v['wall_ms']} |"
            for name, v in result[group].items()
            if isinstance(v, dict) and "cpu_ms" in v
        ]
    batch, check = result["close_per_batch"], result["closes"]["minutes_complete"]
    lines += [
        f"| close per batch ({batch['traces']} traces of 20k spans) | {batch['cpu_ms']} | {batch['wall_ms']} |",
        "",
        f"Minutes whose close rows match run_minutes' heads: {check['complete']} of {check['minutes']} "
        f"({result['closes']['rows']} close rows); same figures as run_totals: {result['closes']['same_figures']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store-dir", type=Path, required=True, help="a COPY of a filled store (tables are added)")
    parser.add_argument("--now", type=float, default=None, help="end of the ranges, epoch s (default: the last span)")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"command": " ".join(["python -m bench.run_closes_probe", *sys.argv[1:]])}
    result |= {"machine": report.machine(), "store": str(args.store_dir)}
    store = ChdbStore(args.store_dir, result_cache_s=0)
    try:
        store.migrate()
        last = "SELECT toUnixTimestamp64Nano(max(start_time)) / 1e9 AS t FROM spans"
        result["now"] = args.now if args.now is not None else float(store.query(last)[0]["t"]) + 1
        result |= probe(store, result["now"], args.repeats)
    finally:
        store.close()
    result["load_at_end"] = os.getloadavg()[0]
    report.write(args.out, result, render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
