"""Integrations behind one protocol, and the batch processor as a plain OpenTelemetry part."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import agentwatch
import pytest
from agentwatch import _integrations
from agentwatch._config import Config, resolve
from agentwatch._export import BoundedBatchProcessor, OTelExporter
from agentwatch._openai import OpenAIIntegration
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Recording:
    """An integration that records what ``init()`` asked of it."""

    def __init__(self, name: str, *, on: bool = True, broken: bool = False) -> None:
        self.name, self.on, self.broken = name, on, broken
        self.calls: list[str] = []

    def enabled(self, config: Config) -> bool:
        return self.on

    def setup(self) -> bool:
        self.calls.append("setup")
        if self.broken:
            raise RuntimeError("our bug")
        return True

    def teardown(self) -> None:
        self.calls.append("teardown")


@pytest.fixture
def extra_integrations() -> Iterator[list[Recording]]:
    added = [Recording("on"), Recording("off", on=False), Recording("broken", broken=True)]
    for integration in added:
        _integrations.register(integration)
    yield added
    for integration in added:
        _integrations._REGISTRY.pop(integration.name)


def test_init_sets_up_each_enabled_integration_and_a_broken_one_costs_nothing(
    extra_integrations: list[Recording],
) -> None:
    before = agentwatch.stats()["internal_errors"]
    agentwatch.init(endpoint="http://127.0.0.1:9", instrument_openai=False)
    on, off, broken = extra_integrations
    assert on.calls == ["setup"] and off.calls == [] and broken.calls == ["setup"]
    assert agentwatch.stats()["internal_errors"] == before + 1
    done = _integrations.setup_integrations(resolve(instrument_openai=False))
    assert done == {"on": True, "broken": False}  # openai is registered but not enabled


def test_openai_is_a_registered_integration_enabled_by_its_option() -> None:
    integration = _integrations.registered()["openai"]
    assert isinstance(integration, OpenAIIntegration)
    assert integration.enabled(resolve()) and not integration.enabled(resolve(instrument_openai=False))


class Failing(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise ConnectionError("down")

    def shutdown(self) -> None:
        raise RuntimeError("also broken")


def test_the_processor_runs_in_any_tracer_provider_with_any_opentelemetry_exporter() -> None:
    memory = InMemorySpanExporter()
    processor = BoundedBatchProcessor(OTelExporter(memory), resolve(export_interval_s=60.0))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with provider.get_tracer("t").start_as_current_span("one"):
        pass
    provider.shutdown()  # OpenTelemetry's no-argument shutdown: the bounded flush, then stop
    assert [s.name for s in memory.get_finished_spans()] == ["one"]
    assert processor.close(1.0) is True  # a second stop is a no-op


def test_an_exporter_that_raises_is_a_failed_delivery_not_an_error() -> None:
    exporter = OTelExporter(Failing())
    assert exporter.export([]).ok is False
    exporter.shutdown()  # logged and counted, never raised


def test_init_sends_spans_to_an_opentelemetry_exporter_given_instead_of_the_collector() -> None:
    memory = InMemorySpanExporter()
    requests_before = agentwatch.stats()["export_requests"]  # the counters are the process's
    agentwatch.init(exporter=memory, instrument_openai=False)
    with agentwatch.run("agent"):
        agentwatch.tool("search")(lambda: None)()
    assert agentwatch.force_flush(5) is True
    assert {"invoke_agent agent", "execute_tool search"} <= {s.name for s in memory.get_finished_spans()}
    assert agentwatch.stats()["export_requests"] == requests_before  # nothing went to a collector
