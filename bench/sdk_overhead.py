"""Cost per call of ``@agentwatch.tool`` on an empty function, against a bare OpenTelemetry span.

Three measurements, nanoseconds of the calling thread's CPU time per call (``thread_time_ns``,
so time spent waiting for a core on a shared machine does not count), measured in interleaved
rounds and keeping each variant's best round:
  plain      the empty function called directly
  otel_span  ``with tracer.start_as_current_span("x"): fn()`` on the same provider
  tool       ``@agentwatch.tool("x")`` on the empty function (outside and inside a run)

Spans go through the SDK's real bounded batch processor; the exporter is one that discards
(``agentwatch.init(exporter=...)``), so the figures are the agent thread's cost, not network time. Target: ``tool`` at
most 1.5x ``otel_span``. Writes ``bench/results/sdk_overhead.json`` and ``.md``.

    .venv/bin/python bench/sdk_overhead.py [--calls 2000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import agentwatch
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

RESULTS = Path(__file__).parent / "results"
TARGET_RATIO = 1.5


class _Discard(SpanExporter):
    """Stands in for the OTLP exporter: accepts every batch at once."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _empty() -> None:
    return None


def _round_ns(body: Callable[[], None], calls: int) -> float:
    start = time.thread_time_ns()
    for _ in range(calls):
        body()
    return (time.thread_time_ns() - start) / calls


def _best_of(variants: dict[str, Callable[[], None]], calls: int, repeats: int) -> dict[str, float]:
    """Interleave the variants round by round so that load changes hit them all alike."""
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(repeats):
        for name, body in variants.items():
            best[name] = min(best[name], _round_ns(body, calls))
        agentwatch.force_flush(10)
    return best


def measure(calls: int, repeats: int) -> dict[str, float]:
    agentwatch.init(
        service_name="bench",
        exporter=_Discard(),
        instrument_openai=False,
        max_queue_size=calls * 16,
        max_export_batch_size=4096,
    )
    tracer = trace.get_tracer("bench")  # the SDK's provider: init() made it the global one
    tool_fn = agentwatch.tool("x")(_empty)

    def otel_span() -> None:
        with tracer.start_as_current_span("x"):
            _empty()

    figures = _best_of({"plain_ns": _empty, "otel_span_ns": otel_span, "tool_ns": tool_fn}, calls, repeats)
    with agentwatch.run("bench-agent"):
        figures.update(_best_of({"otel_span_in_run_ns": otel_span, "tool_in_run_ns": tool_fn}, calls, repeats))
    figures["ratio_tool_vs_otel"] = figures["tool_ns"] / figures["otel_span_ns"]
    figures["ratio_tool_in_run_vs_otel"] = figures["tool_in_run_ns"] / figures["otel_span_in_run_ns"]
    agentwatch.shutdown()
    return figures


def write(figures: dict[str, float], calls: int, repeats: int) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {
        "calls": calls,
        "repeats": repeats,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "target_ratio": TARGET_RATIO,
        "meets_target": figures["ratio_tool_in_run_vs_otel"] <= TARGET_RATIO,
    }
    (RESULTS / "sdk_overhead.json").write_text(json.dumps({**figures, **meta}, indent=2) + "\n")
    lines = [
        "# SDK overhead: `@agentwatch.tool` on an empty function",
        "",
        f"Calling thread's CPU time, {calls} calls per round, best of {repeats} interleaved rounds; "
        f"Python {meta['python']} ({meta['machine']}).",
        "",
        "| measurement | ns/call |",
        "|---|---:|",
        f"| plain call | {figures['plain_ns']:.0f} |",
        f"| bare OpenTelemetry span | {figures['otel_span_ns']:.0f} |",
        f"| `@agentwatch.tool` (no run) | {figures['tool_ns']:.0f} |",
        f"| bare OpenTelemetry span (inside a run) | {figures['otel_span_in_run_ns']:.0f} |",
        f"| `@agentwatch.tool` (inside a run) | {figures['tool_in_run_ns']:.0f} |",
        "",
        f"Ratio to a bare span: {figures['ratio_tool_vs_otel']:.2f}x (no run), "
        f"{figures['ratio_tool_in_run_vs_otel']:.2f}x (inside a run); target <= {TARGET_RATIO}x: "
        f"{'met' if meta['meets_target'] else 'NOT met'}.",
    ]
    (RESULTS / "sdk_overhead.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    figures = measure(args.calls, args.repeats)
    for name, value in figures.items():
        print(f"{name:28s} {value:10.2f}")
    write(figures, args.calls, args.repeats)
    print(f"wrote {RESULTS / 'sdk_overhead.json'} and .md")


if __name__ == "__main__":
    main()
