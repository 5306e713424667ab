"""Where an overview call's time goes on a freshly written store: running its statements, or
planning them (issue 38's first calls).

    python -m bench.query_plan [--spans 50000 500000] [--insert-spans 1000] [--repeats 15]

For each size, a fresh embedded store takes ``bench.ingest``'s agent-like spans (no captured text,
all in the last minute or two, as a collector writes a burst: ``--insert-spans`` a part) and the
overview of the last 24 hours is asked once to record its statements (``collector.query.overview``,
the API's code; the store's result cache off, so every call pays). Then, ``--repeats`` rounds, in
turn, each statement is run as is, as ``EXPLAIN PLAN`` (the analyzer and the planner: everything
but reading the data; scalar subqueries run during analysis) and as ``EXPLAIN AST`` (parsing
alone), and the process's CPU time of each is taken (chDB's threads included). Process CPU in one
process, the variants taking turns, is what a busy machine changes least; wall times are beside it.
Writes ``bench/results/query_plan.{json,md}``.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentwatch_platform.collector.query import overview
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.columns import spans_table
from bench import report
from bench.ingest import span_batches

RESULTS = Path(__file__).parent / "results"
PROJECT = "bench"  # bench.ingest's spans' project
VARIANTS: dict[str, Callable[[str], str]] = {
    "run": lambda sql: sql,
    "plan": lambda sql: f"EXPLAIN PLAN {sql}",
    "parse": lambda sql: f"EXPLAIN AST {sql}",
}
Statement = tuple[str, dict[str, Any] | None]


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def overview_statements(store: ChdbStore, now: float) -> list[Statement]:
    """The statements one overview call of the last 24 hours runs, in order, with their parameters."""
    seen: list[Statement] = []
    run = store.query

    def recording(sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        seen.append((sql, params))
        return run(sql, params)

    store.query = recording  # type: ignore[method-assign]
    try:
        overview.overview(store, PROJECT, start=now - 86_400, end=now)
    finally:
        del store.query
    return seen


def measure(spans: int, insert_spans: int, repeats: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-query-plan-"))
    try:
        store = ChdbStore(folder / "chdb", result_cache_s=0)
        store.migrate()
        for batch in span_batches(spans):
            table = spans_table(batch)
            for offset in range(0, table.num_rows, insert_spans):
                store.insert_spans(table.slice(offset, insert_spans))
        statements = overview_statements(store, time.time())
        cpu: dict[tuple[int, str], list[float]] = {}
        wall: dict[tuple[int, str], list[float]] = {}
        for _ in range(repeats):
            for index, (sql, params) in enumerate(statements):
                for variant, wrap in VARIANTS.items():
                    started_cpu, started = cpu_s(), time.perf_counter()
                    store.query(wrap(sql), params)
                    cpu.setdefault((index, variant), []).append(cpu_s() - started_cpu)
                    wall.setdefault((index, variant), []).append(time.perf_counter() - started)
        parts = store.query(
            "SELECT table, count() AS parts FROM system.parts WHERE active AND database = currentDatabase() "
            "AND table IN ('spans', 'runs_agg', 'span_minutes', 'run_minutes') GROUP BY table ORDER BY table"
        )
        store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = [
        {
            "statement": " ".join(sql.split())[:60],
            **{f"{v}_cpu_ms": round(1000 * statistics.median(cpu[(i, v)]), 2) for v in VARIANTS},
            **{f"{v}_wall_ms": round(1000 * statistics.median(wall[(i, v)]), 2) for v in VARIANTS},
        }
        for i, (sql, _) in enumerate(statements)
    ]
    return {
        "spans": spans,
        "insert_spans": insert_spans,
        "parts": {p["table"]: p["parts"] for p in parts},
        "statements": rows,
    }


def markdown(results: list[dict[str, Any]], command: str, machine: str) -> str:
    lines = [
        "# An overview call: running its statements against planning them",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}",
        "",
        "Medians of the process's CPU time (ms; chDB's threads included) and of wall time, each statement run",
        "as is ('run'), as EXPLAIN PLAN ('plan': analysis and planning, no data read) and as EXPLAIN AST",
        "('parse'), the variants taking turns in one process.",
    ]
    for result in results:
        rows = result["statements"]
        total = {v: sum(r[f"{v}_cpu_ms"] for r in rows) for v in VARIANTS}
        lines += [
            "",
            f"## {result['spans']:,} spans, {result['insert_spans']:,} a part (active parts then: {result['parts']})",
            "",
            "| statement | run CPU ms | plan CPU ms | parse CPU ms | run wall ms |",
            "|---|---:|---:|---:|---:|",
            *(
                f"| `{r['statement']}` | {r['run_cpu_ms']} | {r['plan_cpu_ms']} | {r['parse_cpu_ms']} | {r['run_wall_ms']} |"
                for r in rows
            ),
            f"| all {len(rows)} | {total['run']:.1f} | {total['plan']:.1f} | {total['parse']:.1f} | |",
            "",
            f"Planning is {total['plan'] / total['run']:.0%} of the call's CPU.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, nargs="+", default=[50_000, 500_000])
    parser.add_argument("--insert-spans", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS / "query_plan")
    args = parser.parse_args(argv)
    machine = report.machine()
    results = [measure(n, args.insert_spans, args.repeats) for n in args.spans]
    command = f"python -m bench.query_plan --spans {' '.join(map(str, args.spans))} --insert-spans {args.insert_spans} --repeats {args.repeats}"
    report.write(
        args.out, {"command": command, "machine": machine, "results": results}, markdown(results, command, machine)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
