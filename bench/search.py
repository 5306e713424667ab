"""Search over captured text at retention scale (issue 38): a word or phrase over 30 days of 1M
spans a day, the time of a search and the size of its index.

    python -m bench.search [--spans-per-day 1000000] [--days 30] [--repeats 20] [--store-dir DIR]

Every day is the issue's shape (1 root + 20 children, half of them LLM calls, ~500 B of text on the
root and LLM spans; ``bench.text_store``'s ``issue`` shape) with its own traces (a seed a day), gone
through the collector's decode into a real ``TextStore`` and sealed. The index is built as the hourly
pass builds it (``TextStore.index``), timed. Each needle is then searched ``--repeats`` times over the
whole window as the runs list first asks (``collector.query.text_search.STEPS[0]`` runs, the newest
first): a rare ticket id (one span in ``RARE_EVERY``), a word no text holds, a phrase in about a
tenth of the runs, a word in every run; and the phrase again as far as a group-by of the span
explorer reads (10,000 runs). ``--store-dir`` keeps the files for a rerun (of other code, say).
Writes ``bench/results/search.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from agentwatch_platform.collector.ingest.normalize import Normalizer
from agentwatch_platform.collector.ingest.otlp.decode import PROTOBUF, convert
from agentwatch_platform.collector.query import text_search
from agentwatch_platform.collector.storage import text_index
from agentwatch_platform.collector.storage import texts as text_files
from agentwatch_platform.collector.storage.texts import DAY_NS, TextStore
from agentwatch_platform.reference_agent import workload as wl
from bench.text_store import RARE_EVERY, _without_tool_texts

RESULTS = Path(__file__).parent / "results"
PROJECT = "bench"


def _ticketed(table: pa.Table, seen: int, tickets: list[str]) -> pa.Table:
    """One span in ``RARE_EVERY`` names a ticket (``ticket-<n>``): the kind of needle a user searches for."""
    texts = table.column("input_text").to_pylist()
    for i, text in enumerate(texts):
        if (seen + i) % RARE_EVERY == 0 and text:
            texts[i] = f"{text} ticket-{seen + i:07d}"
            tickets.append(f"TICKET-{seen + i:07d}")
    return table.set_column(table.schema.get_field_index("input_text"), "input_text", pa.array(texts))


def write_days(directory: Path, spans: int, days: int) -> dict[str, Any]:
    """``days`` days of the issue's shape, each its own traces, stashed and sealed; the tickets
    written, and what it took."""
    wl.MIN_CHILDREN = wl.MAX_CHILDREN = 20
    wl.LLM_SHARE = 0.5
    wl.CONTENT_BYTES = 250
    normalizer = Normalizer()
    store = TextStore(directory, retention_days=0)
    tickets: list[str] = []
    seen = 0
    started = time.perf_counter()
    for back in range(days):
        end_ns = time.time_ns() - back * DAY_NS
        for body in wl.Workload(spans, end_time_ns=end_ns, seed=7 + back, project=PROJECT).batches():
            table = _without_tool_texts(convert(body, PROTOBUF, PROJECT, normalizer, max_spans=1 << 30).table)
            store.stash(_ticketed(table, seen, tickets))
            seen += table.num_rows
        store.seal(1)
        print(f"day {back + 1} of {days} written, {time.perf_counter() - started:.0f} s", flush=True)
    store.close()
    return {"spans": seen, "days": days, "tickets": tickets, "write_s": time.perf_counter() - started}


def measure(directory: Path, needles: list[tuple[str, int]], repeats: int) -> dict[str, Any]:
    """Each needle searched ``repeats`` times over every day written, for at most its limit of runs."""
    days = sorted(day for day in map(text_files._day_of, directory.glob("*.awb")) if day is not None)
    for index in directory.glob(f"*{text_index.INDEX_SUFFIX}"):
        index.unlink()
    store = TextStore(directory, retention_days=0)
    started = time.perf_counter()
    indexed = store.index()
    index_s = time.perf_counter() - started
    window = (days[0] * DAY_NS, (days[-1] + 1) * DAY_NS)
    out: dict[str, Any] = {
        "days": len(days),
        "text_bytes": store.size_bytes(),
        "index_bytes": sum(p.stat().st_size for p in directory.glob(f"*{text_index.INDEX_SUFFIX}")),
        "indexed_parts": indexed,
        "index_s": index_s,
        "needles": [],
    }
    for needle, limit in needles:
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            found = store.search(PROJECT, *window, needle, limit=limit)
            times.append(time.perf_counter() - started)
        times.sort()
        out["needles"].append(
            {
                "needle": needle,
                "limit": limit,
                "p50_ms": statistics.median(times) * 1e3,
                "p95_ms": times[min(len(times) - 1, int(0.95 * len(times)))] * 1e3,
                "max_ms": times[-1] * 1e3,
                "traces": len(found.trace_ids),
                "complete": getattr(found, "complete", None),  # None: code from before the flag
            }
        )
        print(json.dumps(out["needles"][-1]), flush=True)
    store.close()
    return out


def render(result: dict[str, Any]) -> str:
    s = result["search"]
    spans = result["spans_per_day"]
    lines = [
        "# Search over captured text at retention scale (bench.search)",
        "",
        f"`{result['command']}` at {result['at']}, load average {result['load_before']} before, "
        f"{result['load_after']} after ({result['machine']}).",
        "",
        f"{s['days']} days of {spans:,} spans each (the issue's shape: ~250 B of text a span on average, each day its own traces), "
        f"{s['text_bytes'] / 2**20:.0f} MiB of text files; their index {s['index_bytes'] / 2**20:.1f} MiB "
        f"({s['index_bytes'] / spans / s['days']:.2f} B/span), built in {s['index_s']:.1f} s "
        f"({s['indexed_parts']} blocks and frames) as the hourly pass builds it.",
        "",
        "| needle | at most (runs) | p50 ms | p95 ms | max ms | runs found | whole range searched |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for v in s["needles"]:
        complete = {True: "yes", False: "no: stopped at the limit, newest first", None: "-"}[v["complete"]]
        lines.append(
            f"| `{v['needle']}` | {v['limit']:,} | {v['p50_ms']:.0f} | {v['p95_ms']:.0f} | {v['max_ms']:.0f} "
            f"| {v['traces']:,} | {complete} |"
        )
    lines += ["", *(f"- {note}" for note in result.get("notes", []))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans-per-day", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--store-dir", type=Path, help="keep (or reuse) the day's text files here")
    parser.add_argument("--out", type=Path, default=RESULTS / "search", help="result path without suffix")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "command": "python -m bench.search " + " ".join(argv if argv is not None else sys.argv[1:]),
        "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores",
        "load_before": round(os.getloadavg()[0], 2),
        "spans_per_day": args.spans_per_day,
    }
    directory = args.store_dir or Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-search-{os.getpid()}"
    meta_path = directory / "bench-search.json"
    if meta_path.exists():
        written = json.loads(meta_path.read_text())
    else:
        directory.mkdir(parents=True, exist_ok=True)
        written = write_days(directory, args.spans_per_day, args.days)
        meta_path.write_text(json.dumps(written))
    result["write_s"] = written["write_s"]
    page = text_search.STEPS[0]  # what the runs list asks first
    ticket = written["tickets"][len(written["tickets"]) // 2]  # in one span of the middle day
    needles = [(ticket, page), ("zebra", page), ("budget token", page), ("agent", page), ("budget token", 10_000)]
    try:
        result["search"] = measure(directory, needles, args.repeats)
    finally:
        if args.store_dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    result["load_after"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
