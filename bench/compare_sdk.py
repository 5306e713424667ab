"""Per-call cost of tracing one empty tool function, one instrumentation per process.

Run by ``bench/compare.py`` as ``python bench/compare_sdk.py MODE ENDPOINT ITERATIONS``
under the interpreter that has MODE's library (Phoenix's lives in a separate virtualenv), so
each measurement has its own global tracer provider and nothing else imported. Every mode
exports through a batch processor to the same local sink, as a production setup would.
Prints one JSON object: seconds per call (best of several rounds) for the traced function and
for the same function untraced.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

ROUNDS = 5


def _empty() -> None:
    return None


def _agentwatch(endpoint: str) -> Callable[[], None]:
    import agentwatch

    agentwatch.init(endpoint=endpoint, api_key="bench", project="bench", service_name="bench-sdk")
    return agentwatch.tool("empty")(_empty)


def _otel(endpoint: str) -> Callable[[], None]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces")))
    return provider.get_tracer("bench").start_as_current_span("tool")(_empty)


def _phoenix(endpoint: str) -> Callable[[], None]:
    from phoenix.otel import register

    provider = register(endpoint=endpoint + "/v1/traces", project_name="bench", batch=True, verbose=False)
    return provider.get_tracer("bench").tool(_empty)


MODES: dict[str, Callable[[str], Callable[[], None]]] = {
    "agentwatch": _agentwatch,
    "otel": _otel,
    "phoenix": _phoenix,
}


def _per_call(fn: Callable[[], None], iterations: int) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        best = min(best, (time.perf_counter() - start) / iterations)
    return best


def main(argv: list[str]) -> int:
    mode, endpoint, iterations = argv[0], argv[1].rstrip("/"), int(argv[2])
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r}; expected one of {sorted(MODES)}")
    traced = MODES[mode](endpoint)
    traced()  # first call pays for lazy set-up, not measured
    result = {
        "mode": mode,
        "traced_s": _per_call(traced, iterations),
        "bare_s": _per_call(_empty, iterations),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
