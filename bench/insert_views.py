"""What each materialized view on the spans costs an insert (issue 37's ingest within 5 %).

    python -m bench.insert_views [--insert-spans 20000] [--rounds 30] [--variants all,no-span-keys,...]

One embedded store takes ``bench.ingest``'s agent-like spans (no captured text) in inserts of
``--insert-spans``, the collector's batch under load (``FLUSH_ROWS``). Before each insert the views
are dropped and made again as one variant says; the variants take turns, ``--rounds`` inserts
each, and the process's CPU time of each ``Store.insert_spans`` is taken (chDB's threads
included). Process CPU in one process, variants taking turns, is what a busy machine changes
least. Every variant writes the same tables (a view left out leaves its table unfilled), so the
figures compare views only. Writes ``bench/results/insert_views.{json,md}``.

Variants: ``all`` (the views as migrated); ``no-<view>`` with ``<view>`` left out (``+`` joins
several: ``no-span_key_minutes_mv+span_key_hours_mv`` is the store before the span explorer's
rollups); ``keys-bare``: ``span_key_minutes_mv`` without its error keys, runs and duration states
(what its GROUP BY alone costs).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from agentwatch_platform.collector.storage import schema
from agentwatch_platform.collector.storage.chdb_store import ChdbStore
from agentwatch_platform.collector.storage.columns import spans_table
from agentwatch_platform.collector.storage.sql import span_keys
from bench import ingest, report

RESULTS = Path(__file__).parent / "results"
DEFAULT_VARIANTS = ("all", "no-span_key_hours_mv", "no-span_key_minutes_mv+span_key_hours_mv", "keys-bare")

# The views on spans and on their rollups, as the last migration leaves them.
VIEWS: dict[str, str] = {
    "runs_mv": schema.RUNS_MV,
    "run_minutes_mv": schema.RUN_MINUTES_REFUSED[-1],
    "span_minutes_mv": schema.SPAN_MINUTES_MV,
    "span_hours_mv": schema.SPAN_HOURS_MV,
    "span_key_minutes_mv": span_keys.SPAN_KEY_MINUTES_MV,
    "span_key_hours_mv": span_keys.SPAN_KEY_HOURS_MV,
}


def _bare_keys_view() -> str:
    """span_key_minutes_mv with constants for its error keys, runs and duration: its GROUP BY alone."""
    sql = span_keys.SPAN_KEY_MINUTES_MV
    for expression, constant in (
        (f"{span_keys.ERROR_KEY} AS error_key", "'' AS error_key"),
        (f"{span_keys.ERROR_BASE} AS error_base", "'' AS error_base"),
        ("uniqExactState(cityHash64(trace_id))", "uniqExactState(toUInt64(0))"),
        (f"quantilesTDigestState(0.5, 0.95)({span_keys.DURATION_S})", "quantilesTDigestState(0.5, 0.95)(0.)"),
    ):
        if expression not in sql:
            raise ValueError(f"span_key_minutes_mv no longer holds {expression[:40]!r}: update keys-bare")
        sql = sql.replace(expression, constant)
    return sql


def views_of(variant: str) -> list[str]:
    """The CREATE statements of ``variant``'s views."""
    if variant == "all":
        return list(VIEWS.values())
    if variant == "keys-bare":
        return [_bare_keys_view() if name == "span_key_minutes_mv" else sql for name, sql in VIEWS.items()]
    if variant.startswith("no-"):
        left_out = set(variant.removeprefix("no-").split("+"))
        if unknown := left_out - set(VIEWS):
            raise ValueError(f"no view named {', '.join(sorted(unknown))}; the views: {', '.join(VIEWS)}")
        return [sql for name, sql in VIEWS.items() if name not in left_out]
    raise ValueError(f"unknown variant {variant!r}: all, keys-bare or no-<view>[+<view>...]")


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(variants: list[str], insert_spans: int, rounds: int) -> dict[str, Any]:
    statements = {variant: views_of(variant) for variant in variants}  # a bad name fails before the fill
    folder = Path(tempfile.mkdtemp(prefix="bench-insert-views-"))
    try:
        store = ChdbStore(folder / "chdb", result_cache_s=0)
        store.migrate()
        ingest.BATCH = insert_spans
        batches = [spans_table(b) for b in ingest.span_batches(insert_spans * (rounds * len(variants) + 2))]
        for warm in batches[:2]:  # the first inserts of a process pay for loading code
            store.insert_spans(warm)
        cpu: dict[str, list[float]] = {variant: [] for variant in variants}
        turns = iter(batches[2:])
        for _ in range(rounds):
            for variant in variants:
                for name in VIEWS:
                    store.command(f"DROP VIEW IF EXISTS {name}")
                for sql in statements[variant]:
                    store.command(sql)
                batch = next(turns)
                started = cpu_s()
                store.insert_spans(batch)
                cpu[variant].append(cpu_s() - started)
        store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "insert_spans": insert_spans,
        "rounds": rounds,
        "variants": [
            {
                "variant": variant,
                "cpu_ms_median": round(1000 * statistics.median(cpu[variant]), 1),
                "cpu_ms_mean": round(1000 * statistics.mean(cpu[variant]), 1),
                "cpu_us_per_span": round(1e6 * statistics.median(cpu[variant]) / insert_spans, 2),
            }
            for variant in variants
        ],
    }


def markdown(result: dict[str, Any], command: str, machine: str) -> str:
    base = result["variants"][0]["cpu_ms_median"]
    return (
        "\n".join(
            [
                "# What each view on the spans costs an insert",
                "",
                f"Command: `{command}`  ",
                f"Machine: {machine}",
                "",
                f"Process CPU of one `Store.insert_spans` of {result['insert_spans']:,} spans, the variants taking turns in",
                f"one process, {result['rounds']} inserts each (median and mean, ms; chDB's threads included).",
                "",
                f"| variant | CPU ms median | CPU ms mean | µs a span | vs {result['variants'][0]['variant']} |",
                "|---|---:|---:|---:|---:|",
                *(
                    f"| {v['variant']} | {v['cpu_ms_median']} | {v['cpu_ms_mean']} | {v['cpu_us_per_span']} | "
                    f"{v['cpu_ms_median'] / base - 1:+.0%} |"
                    for v in result["variants"]
                ),
            ]
        )
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--insert-spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    parser.add_argument("--out", type=Path, default=RESULTS / "insert_views")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    machine = report.machine()
    result = measure(variants, args.insert_spans, args.rounds)
    command = (
        f"python -m bench.insert_views --insert-spans {args.insert_spans} --rounds {args.rounds} "
        f"--variants {args.variants}"
    )
    report.write(args.out, {"command": command, "machine": machine, **result}, markdown(result, command, machine))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
