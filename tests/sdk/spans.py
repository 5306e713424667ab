"""Spans the SDK tests assert on: an initialised SDK whose finished spans are also kept in memory."""

from __future__ import annotations

import agentwatch
from agentwatch._tracing import STATE
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Spans:
    """Finished spans of the current test, by name and kind."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def one(self, name: str) -> ReadableSpan:
        found = [s for s in self.all() if s.name == name]
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.all()]}"
        return found[0]

    def kind(self, kind: str) -> list[ReadableSpan]:
        return [s for s in self.all() if (s.attributes or {}).get("agentwatch.span.kind") == kind]


def init_with_memory(**options: object) -> Spans:
    """``agentwatch.init`` plus an in-memory copy of every span (the real SDK path)."""
    options.setdefault("endpoint", "http://127.0.0.1:9")  # discard port: exports fail fast
    options.setdefault("export_retries", 0)
    options.setdefault("instrument_openai", False)
    agentwatch.init(**options)
    exporter = InMemorySpanExporter()
    assert STATE.provider is not None
    STATE.provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Spans(exporter)
