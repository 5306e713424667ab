"""OTLP export of the simulated engine's per-request spans, shaped like vLLM's.

vLLM exports one SERVER span named ``llm_request`` per finished request, parented on the
W3C ``traceparent`` the request carried, with ``gen_ai.latency.*`` timings and
``gen_ai.usage.*`` token counts. This module does the same through the real OpenTelemetry
SDK and OTLP/HTTP protobuf exporter, with the collector's project key as a bearer token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from agentwatch import semconv as sc
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()


def traces_url(endpoint: str) -> str:
    """``endpoint`` as an OTLP/HTTP traces URL: a bare base URL gets ``/v1/traces``."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"OTLP endpoint must be an http(s) URL, got {endpoint!r}")
    if parts.path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


@dataclass(frozen=True)
class RequestRecord:
    """Timings (epoch seconds) and sizes of one finished request."""

    request_id: str
    model: str
    arrival: float
    scheduled: float
    first_token: float
    finished: float
    prompt_tokens: int
    completion_tokens: int
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    finish_reason: str
    cached_tokens: int = 0  # prompt tokens served from the prefix cache


def span_attributes(record: RequestRecord) -> dict[str, str | int | float | tuple[str, ...]]:
    """The attributes vLLM puts on its ``llm_request`` span, plus the finish reason."""
    attributes: dict[str, str | int | float | tuple[str, ...]] = {
        sc.GEN_AI_RESPONSE_FINISH_REASONS: (record.finish_reason,),
        sc.GEN_AI_REQUEST_ID: record.request_id,
        sc.GEN_AI_REQUEST_MODEL: record.model,
        sc.GEN_AI_RESPONSE_MODEL: record.model,
        sc.GEN_AI_REQUEST_N: 1,
        sc.GEN_AI_USAGE_PROMPT_TOKENS: record.prompt_tokens,
        sc.GEN_AI_USAGE_COMPLETION_TOKENS: record.completion_tokens,
        # Not on vLLM's span (its usage reply has it): the simulation adds the prefix-cache hits
        # under the GenAI name, so a client that records no cached tokens still gets them joined.
        sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: record.cached_tokens,
        sc.GEN_AI_LATENCY_TIME_IN_QUEUE: record.scheduled - record.arrival,
        sc.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN: record.first_token - record.arrival,
        sc.GEN_AI_LATENCY_E2E: record.finished - record.arrival,
        sc.GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL: record.first_token - record.scheduled,
        sc.GEN_AI_LATENCY_TIME_IN_MODEL_DECODE: record.finished - record.first_token,
        sc.GEN_AI_LATENCY_TIME_IN_MODEL_INFERENCE: record.finished - record.scheduled,
    }
    optional = {
        sc.GEN_AI_REQUEST_MAX_TOKENS: record.max_tokens,
        sc.GEN_AI_REQUEST_TEMPERATURE: record.temperature,
        sc.GEN_AI_REQUEST_TOP_P: record.top_p,
    }
    attributes.update({key: value for key, value in optional.items() if value is not None})
    return attributes


class EngineTracer:
    """Exports ``llm_request`` spans to an OTLP/HTTP endpoint; ``shutdown()`` flushes."""

    def __init__(
        self, endpoint: str, *, api_key: str | None = None, service_name: str = "agentwatch-sim-engine"
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self._provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url(endpoint), headers=headers))
        )
        self._tracer = self._provider.get_tracer("reference_agent.engine")

    def record(self, record: RequestRecord, carrier: Mapping[str, str]) -> None:
        """Export one finished request, inside the caller's trace when ``carrier`` has a traceparent."""
        context = _PROPAGATOR.extract(carrier=dict(carrier))
        span = self._tracer.start_span(
            sc.VLLM_SPAN_NAME,
            context=context,
            kind=SpanKind.SERVER,
            attributes=span_attributes(record),
            start_time=int(record.arrival * 1e9),
        )
        span.end(end_time=int(record.finished * 1e9))

    def force_flush(self, timeout_ms: int = 5000) -> bool:
        return self._provider.force_flush(timeout_ms)

    def shutdown(self) -> None:
        self._provider.shutdown()
