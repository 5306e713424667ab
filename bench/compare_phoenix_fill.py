"""Fill Phoenix's SQLite database with a large workload from a small one it ingested itself.

Phoenix 20.26.1 stores ~80-140 spans/s on this 2-core machine (``bench/results/compare.md``):
500k spans through its OTLP endpoint take one to two hours. This copies instead, in SQL, the
rows Phoenix wrote for a pool of spans it ingested through its own OTLP endpoint
(``python -m bench.compare --spans N --workdir POOL``), once per further pass of the workload:

- ``traces``: each pool trace again, its trace id rewritten as the workload's passes rewrite
  it (``reference_agent/workload.py``: the 4 bytes after the 6-byte marker hold the pass), so
  the copy holds exactly the trace ids agentwatch is sent;
- ``spans``: each pool span again in its copied trace, every column as Phoenix computed it
  (attributes, events, status, the cumulative error and token counts), with a new span id
  (its first 2 bytes replaced by a value no pool span id starts with, one per pass; parent
  ids alike): Phoenix keys a span by its span id alone, so the workload's repeated span ids
  could not reach it through OTLP at all;
- ``span_costs`` and ``span_cost_details``: each copied span's cost rows, as Phoenix priced them.

Rows are copied in the pool's row order, pass after pass, as the workload sends them. Nothing
else (annotations, sessions) exists in the pool; the script refuses a pool where it does.
Run with any Python 3 (the standard library's sqlite3), Phoenix not running:

    python bench/compare_phoenix_fill.py --pool POOL --into DIR --spans 500000
    python -m bench.compare --spans 500000 --workdir DIR

It writes ``DIR/phoenix-data`` and ``DIR/workload.json`` (the pool's workload at ``--spans``,
with how Phoenix was filled, which the compare run puts in its notes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path

TRACE_MARKER = "a6e1b0c4d2f3"  # reference_agent.workload.TRACE_MARKER, in hex
_EMPTY_TABLES = ("project_sessions", "span_annotations", "trace_annotations", "document_annotations")
_SPAN_COLUMNS = (
    "name, span_kind, start_time, end_time, attributes, events, status_code, status_message, "
    "cumulative_error_count, cumulative_llm_token_count_prompt, cumulative_llm_token_count_completion, "
    "llm_token_count_prompt, llm_token_count_completion"
)
_COST_COLUMNS = "model_id, span_start_time, total_cost, total_tokens, prompt_cost, prompt_tokens, completion_cost, completion_tokens"


def _trace_id(column: str) -> str:
    """SQL for a pool trace id rewritten to pass ``:slot`` (8 hex digits after the marker)."""
    return f"substr({column}, 1, 12) || :slot || substr({column}, 21)"


def _span_id(column: str) -> str:
    """SQL for a pool span id made that of the pass's copy (``:prefix``: its first 4 hex digits)."""
    return f":prefix || substr({column}, 5)"


def copy_pass(db: sqlite3.Connection, number: int, prefix: str, last: dict[str, int]) -> None:
    """Copy the pool's rows (ids up to ``last``) once more, as pass ``number`` whose span ids
    start with ``prefix``, in one transaction."""
    params = {"slot": f"{number:08x}", "prefix": prefix, **last}
    with db:
        db.execute(
            "INSERT INTO traces (project_rowid, trace_id, start_time, end_time, project_session_rowid) "
            f"SELECT project_rowid, {_trace_id('trace_id')}, start_time, end_time, project_session_rowid "
            "FROM traces WHERE id <= :traces ORDER BY id",
            params,
        )
        db.execute(
            f"INSERT INTO spans (trace_rowid, span_id, parent_id, {_SPAN_COLUMNS}) "
            f"SELECT nt.id, {_span_id('s.span_id')}, "
            f"CASE WHEN s.parent_id IS NULL THEN NULL ELSE {_span_id('s.parent_id')} END, "
            + ", ".join(f"s.{c.strip()}" for c in _SPAN_COLUMNS.split(","))
            + " FROM spans s JOIN traces ot ON ot.id = s.trace_rowid "
            f"JOIN traces nt ON nt.trace_id = {_trace_id('ot.trace_id')} "
            "WHERE s.id <= :spans ORDER BY s.id",
            params,
        )
        db.execute(
            f"INSERT INTO span_costs (span_rowid, trace_rowid, {_COST_COLUMNS}) "
            "SELECT ns.id, ns.trace_rowid, "
            + ", ".join(f"c.{c.strip()}" for c in _COST_COLUMNS.split(","))
            + " FROM span_costs c JOIN spans os ON os.id = c.span_rowid "
            f"JOIN spans ns ON ns.span_id = {_span_id('os.span_id')} "
            "WHERE c.id <= :span_costs ORDER BY c.id",
            params,
        )
        db.execute(
            "INSERT INTO span_cost_details (span_cost_id, token_type, is_prompt, cost, tokens, cost_per_token) "
            "SELECT nc.id, d.token_type, d.is_prompt, d.cost, d.tokens, d.cost_per_token "
            "FROM span_cost_details d JOIN span_costs oc ON oc.id = d.span_cost_id "
            "JOIN spans os ON os.id = oc.span_rowid "
            f"JOIN spans ns ON ns.span_id = {_span_id('os.span_id')} "
            "JOIN span_costs nc ON nc.span_rowid = ns.id "
            "WHERE d.id <= :span_cost_details ORDER BY d.id",
            params,
        )


def check_pool(db: sqlite3.Connection) -> dict[str, int]:
    """The pool's last row id per copied table; refuses a pool this copy would not reproduce."""
    for table in _EMPTY_TABLES:
        if db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]:
            raise SystemExit(f"the pool has rows in {table}, which this copy does not reproduce")
    foreign = db.execute(
        "SELECT count(*) FROM traces WHERE substr(trace_id, 1, 20) != ?", (TRACE_MARKER + "0" * 8,)
    ).fetchone()[0]
    if foreign:
        raise SystemExit(f"{foreign} pool traces are not the workload's first pass (trace id marker)")
    spans, tails = db.execute("SELECT count(*), count(DISTINCT substr(span_id, 5)) FROM spans").fetchone()
    if spans != tails:
        raise SystemExit("pool span ids differ only in their first 2 bytes: a copy could not keep them apart")
    tables = ("traces", "spans", "span_costs", "span_cost_details")
    return {t: db.execute(f"SELECT coalesce(max(id), 0) FROM {t}").fetchone()[0] for t in tables}


def free_prefixes(db: sqlite3.Connection, count: int) -> list[str]:
    """``count`` first-2-byte values (hex) that no pool span id starts with: with the rest of
    each id unique in the pool, the copies' ids are unique among themselves and the pool's."""
    used = {row[0] for row in db.execute("SELECT DISTINCT substr(span_id, 1, 4) FROM spans")}
    free = [f"{n:04x}" for n in range(1 << 16) if f"{n:04x}" not in used][:count]
    if len(free) < count:
        raise SystemExit(f"the pool leaves {len(free)} span id prefixes free, {count} passes need one each")
    return free


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare_phoenix_fill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=Path, required=True, help="a bench.compare --workdir Phoenix ingested")
    parser.add_argument("--into", type=Path, required=True, help="the --workdir of the larger run")
    parser.add_argument("--spans", type=int, required=True, help="spans of the larger run, a multiple of the pool's")
    args = parser.parse_args(argv)
    pool = json.loads((args.pool / "workload.json").read_text())
    if pool["spans"] != pool["unique_spans"] or args.spans % pool["spans"]:
        raise SystemExit(f"--spans must be a multiple of the pool's {pool['spans']} unique spans")
    target = args.into / "phoenix-data"
    if target.exists():
        raise SystemExit(f"{target} exists already")
    args.into.mkdir(parents=True, exist_ok=True)
    shutil.copytree(args.pool / "phoenix-data", target)
    started, passes = time.perf_counter(), args.spans // pool["spans"]
    db = sqlite3.connect(target / "phoenix.db")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    last = check_pool(db)
    for number, prefix in enumerate(free_prefixes(db, passes - 1), start=1):
        copy_pass(db, number, prefix, last)
    spans = db.execute("SELECT count(*) FROM spans").fetchone()[0]
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    how = (
        f"{pool['spans']:,} spans through its own OTLP endpoint (bench.compare --workdir {args.pool}), "
        f"then its rows for them copied in SQL {passes - 1} more times (bench/compare_phoenix_fill.py: trace ids "
        "as the workload's passes rewrite them, span ids made unique, every other column as Phoenix wrote it)"
    )
    (args.into / "workload.json").write_text(json.dumps({**pool, "spans": args.spans, "phoenix_fill": how}, indent=2))
    print(f"{spans:,} spans in {target} after {passes} passes, {time.perf_counter() - started:.0f} s")
    return 0 if spans == args.spans else 1


if __name__ == "__main__":
    sys.exit(main())
