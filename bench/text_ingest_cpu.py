"""The collector's CPU for ingest with captured text, and the text's bytes on disk: one side of an
A/B run from each side's worktree (its code on PYTHONPATH), alternating, so a loaded machine's
wall-clock swings do not decide.

    python -m bench.text_ingest_cpu [--spans 100000] [--shape issue|workload]

The real collector (``bench.ingest.Collector``) takes ``--spans`` of ``reference_agent.workload``
over OTLP/HTTP protobuf from 4 senders (``issue``: 1 root + 20 children, half LLM calls, ~250 B per
text, tool spans without text, as ``bench.text_store``'s issue shape; ``workload``: ~700 B of text
on every span). Prints one JSON line: the collector's utime + stime (``/proc``) from the first
send until every span is stored plus 5 s (the sealer finishing), spans/s, and bytes per span of
``chdb/texts`` and of the whole data directory after a clean stop (which seals what is left).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from agentwatch_platform.reference_agent import workload as wl
from bench.ingest import Collector, _send_all, _wait_stored


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _issue_shape() -> None:
    wl.MIN_CHILDREN = wl.MAX_CHILDREN = 20
    wl.LLM_SHARE = 0.5
    wl.CONTENT_BYTES = 250
    tool = wl._Builder._tool

    def without_text(self: Any, *args: Any) -> Any:  # the issue's tool spans carry no text
        content, self.content = self.content, False
        try:
            return tool(self, *args)
        finally:
            self.content = content

    wl._Builder._tool = without_text  # type: ignore[method-assign]


def _bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def measure(spans: int) -> dict[str, Any]:
    work = wl.Workload(spans, end_time_ns=time.time_ns(), batch_spans=1000, project="bench", content=True)
    bodies = list(work.batches())
    with tempfile.TemporaryDirectory() as tmp:
        with Collector(Path(tmp)) as collector:
            key = collector.key("bench")
            assert collector.proc is not None
            before, started = _cpu_s(collector.proc.pid), time.perf_counter()
            _send_all(collector.url, key, bodies, 4, "protobuf")
            stored_s = _wait_stored(collector, work.totals.spans, started)
            time.sleep(5)
            cpu_s = _cpu_s(collector.proc.pid) - before
        return {
            "spans": work.totals.spans,
            "cpu_s": round(cpu_s, 2),
            "spans_per_s": round(work.totals.spans / stored_s),
            "text_bytes_per_span": round(_bytes(Path(tmp) / "chdb" / "texts") / work.totals.spans, 1),
            "dir_bytes_per_span": round(_bytes(Path(tmp)) / work.totals.spans, 1),
            "load": round(os.getloadavg()[0], 1),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--shape", choices=["issue", "workload"], default="issue")
    args = parser.parse_args(argv)
    if args.shape == "issue":
        _issue_shape()
    print(json.dumps({"shape": args.shape, **measure(args.spans)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
