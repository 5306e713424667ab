"""Process-wide SDK state: ``init``, ``shutdown``, ``force_flush``, ``stats``.

The SDK always builds its own ``TracerProvider``, so its spans go to the agentwatch collector
whatever else the process does. That provider also becomes the global OpenTelemetry provider
only when none was set before ``init()`` (then other OpenTelemetry instrumentations in the
process join the same traces); a provider the user installed is never replaced.

Before ``init()`` (or with ``enabled=False``) a no-op tracer is used: decorators and the
OpenAI wrapper still run the user's code unchanged, budgets still apply, nothing is exported.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from . import semconv as sc
from ._config import Config, logger, resolve
from ._export import BoundedBatchProcessor, OTelExporter, OtlpHttpExporter
from ._pricing import PriceTable
from ._redact import Redactor
from ._stats import COUNTERS


def sdk_version() -> str:
    try:
        return package_version("agentwatch")
    except PackageNotFoundError:
        return "0+unknown"


class _State:
    """What ``init()`` built; read by every span, replaced only under ``_lock``."""

    def __init__(self) -> None:
        self.config: Config | None = None
        self.provider: TracerProvider | None = None
        self.processor: BoundedBatchProcessor | None = None
        self.tracer: trace.Tracer = trace.NoOpTracer()
        self.redactor: Redactor | None = None  # None: content capture off
        self._prices: PriceTable | None = None
        self.lock = threading.Lock()
        self.atexit_registered = False

    @property
    def prices(self) -> PriceTable:
        if self._prices is None:
            self._prices = PriceTable()
        return self._prices

    @property
    def enabled(self) -> bool:
        return self.provider is not None


STATE = _State()

# Run after an ``init()`` that enables tracing; integrations (``_openai``) register themselves
# here, so this module names none of them.
_INIT_HOOKS: list[Callable[[Config], object]] = []


def on_init(hook: Callable[[Config], object]) -> None:
    """Call ``hook(config)`` after every ``init()`` that turns tracing on."""
    _INIT_HOOKS.append(hook)


def init(
    endpoint: str | None = None,
    api_key: str | None = None,
    project: str | None = None,
    service_name: str | None = None,
    capture_content: bool | None = None,
    redact: Callable[[str], str] | None = None,
    sample_rate: float | None = None,
    *,
    exporter: SpanExporter | None = None,
    **options: object,
) -> None:
    """Start tracing. Arguments win over ``AGENTWATCH_*`` variables, which win over defaults.

    ``exporter``: any OpenTelemetry ``SpanExporter`` to receive the spans instead of the
    collector (a console or in-memory one, another back end); it runs on the SDK's bounded
    batch worker, and a failure or exception of it is a failed batch, never the agent's error.

    Idempotent: a second call while initialised changes nothing (call ``shutdown()`` first to
    re-initialise with other settings). Further keyword options: ``prices_file``, ``enabled``,
    ``instrument_openai``, ``max_queue_size``, ``max_export_batch_size``,
    ``export_interval_s``, ``export_timeout_s``, ``export_retries``, ``shutdown_timeout_s``,
    ``max_content_chars``, ``service_version`` (the agent's version, OpenTelemetry's
    ``service.version``; a run may name its own: ``agentwatch.run(version=...)``) (see ``agentwatch._config.VARIABLES``).
    """
    config = resolve(
        endpoint=endpoint,
        api_key=api_key,
        project=project,
        service_name=service_name,
        capture_content=capture_content,
        redact=redact,
        sample_rate=sample_rate,
        **options,
    )
    with STATE.lock:
        if STATE.config is not None:
            logger.debug("agentwatch: init() called again; keeping the first configuration")
            return
        prices = PriceTable.from_file(config.prices_file) if config.prices_file else PriceTable()
        STATE.config = config
        STATE._prices = prices
        STATE.redactor = Redactor(config.redact, config.max_content_chars) if config.capture_content else None
        if config.enabled:
            _start_provider(config, exporter)
        if not STATE.atexit_registered:
            atexit.register(_at_exit)
            STATE.atexit_registered = True
    if config.enabled:
        for hook in _INIT_HOOKS:
            hook(config)


def _start_provider(config: Config, exporter: SpanExporter | None) -> None:
    resource = Resource.create(
        {
            "service.name": config.service_name,
            sc.AW_PROJECT: config.project,
            sc.AW_SDK_VERSION: sdk_version(),
            **({sc.SERVICE_VERSION: config.service_version} if config.service_version else {}),
        }
    )
    provider = TracerProvider(
        resource=resource, sampler=ParentBased(TraceIdRatioBased(config.sample_rate)), shutdown_on_exit=False
    )  # our own atexit flush is the bounded one
    processor = BoundedBatchProcessor(OTelExporter(exporter) if exporter else OtlpHttpExporter(config), config)
    provider.add_span_processor(processor)
    STATE.provider, STATE.processor = provider, processor
    STATE.tracer = provider.get_tracer("agentwatch", sdk_version())
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)


def shutdown(timeout_s: float | None = None) -> bool:
    """Flush (bounded by ``timeout_s``, default the configured shutdown timeout) and stop.

    Safe to call twice and before ``init()``. Returns whether every queued span was exported.
    Afterwards ``init()`` may be called again.
    """
    with STATE.lock:
        config, provider, processor = STATE.config, STATE.provider, STATE.processor
        STATE.config = STATE.provider = STATE.processor = None
        STATE.tracer = trace.NoOpTracer()
        STATE.redactor = None
    if processor is None or provider is None or config is None:
        return True
    ok = processor.close(timeout_s if timeout_s is not None else config.shutdown_timeout_s)
    provider.shutdown()  # the processor is already stopped; this only marks the provider
    return ok


def force_flush(timeout_s: float = 5.0) -> bool:
    """Export what is queued now; True when it all reached the collector within ``timeout_s``.

    On False the rest is still being exported in the background (``stats()["spans_pending"]``).
    """
    processor = STATE.processor
    return True if processor is None else processor.force_flush(int(timeout_s * 1000))


def stats() -> dict[str, int]:
    """The SDK's counters (spans started/exported/dropped, failed exports, ...) and queue size.

    The span counters add up in every snapshot: ``spans_ended == spans_exported + spans_failed
    + spans_pending`` (pending: queued or in an export still in flight; ``queue_size`` is only
    the queued part), and every sampled span agentwatch opened and closed is ended or dropped.
    """
    snapshot = COUNTERS.snapshot()
    processor = STATE.processor
    snapshot["queue_size"] = processor.queue_size() if processor is not None else 0
    return snapshot


def _at_exit() -> None:
    """Bounded flush at interpreter exit; a dead collector costs at most the shutdown timeout."""
    try:
        shutdown()
    except Exception as exc:  # never turn a clean exit into a traceback
        logger.warning("agentwatch: flush at exit failed: %r", exc)
