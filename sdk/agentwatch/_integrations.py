"""Integrations: one module per instrumented third-party library (``_openai``), one small protocol.

An integration registers itself when its module is imported (``register``); every ``init()``
that turns tracing on sets up the registered integrations its configuration enables. Its
wrappers pass straight through unless ``tracing_active()``, and drive each call's span through
``LlmCall`` (start, current around the library call, finish when the response or the stream
ends), never a span scope's internals. Another library (Anthropic, LiteLLM) is one more module
that implements ``Integration`` and calls ``register``.
"""

from __future__ import annotations

from typing import Protocol

from opentelemetry import context as otel_context

from ._config import Config
from ._decorators import llm
from ._export import instrumentation_suppressed
from ._stats import internal_error
from ._tracing import STATE, on_init


class Integration(Protocol):
    """Auto-instrumentation of one library. ``setup`` and ``teardown`` must not raise and must
    not block; a library that is missing or too old makes ``setup`` return False (with at
    most a log line), and ``setup`` twice patches once."""

    name: str

    def enabled(self, config: Config) -> bool:
        """Whether ``init()`` with ``config`` sets this integration up."""
        ...

    def setup(self) -> bool:
        """Patch the library; True when it is instrumented."""
        ...

    def teardown(self) -> None:
        """Put the library's own functions back."""
        ...


_REGISTRY: dict[str, Integration] = {}


def register(integration: Integration) -> None:
    _REGISTRY[integration.name] = integration


def registered() -> dict[str, Integration]:
    return dict(_REGISTRY)


def setup_integrations(config: Config) -> dict[str, bool]:
    """Set up every registered integration ``config`` enables; which ones are instrumented."""
    done: dict[str, bool] = {}
    for name, integration in list(_REGISTRY.items()):
        try:
            if integration.enabled(config):
                done[name] = integration.setup()
        except Exception as exc:  # a broken integration never stops init()
            internal_error(f"setting up the {name} integration", exc)
            done[name] = False
    return done


on_init(setup_integrations)


def tracing_active() -> bool:
    """False before ``init()``, with ``enabled=False``, and inside the SDK's own export."""
    return STATE.enabled and not instrumentation_suppressed()


def capturing_content() -> bool:
    """Whether prompt and completion text is recorded (``capture_content``): collect it only then."""
    return STATE.redactor is not None


class LlmCall:
    """One library call's LLM span, as an integration opens it without a ``with`` block.

    ``start()`` may raise ``BudgetExceeded`` (the user's budget, before any span exists);
    ``activate()``/``deactivate()`` make the span current around the library call, so the
    call's own instrumentation (HTTP, the engine's ``traceparent``) nests under it;
    ``finish(exc)`` ends it, once the response or the last chunk of a stream is in. ``scope``
    is the ``agentwatch.llm`` handle for usage and messages.
    """

    def __init__(self, model: str, *, provider: str | None = None, streaming: bool = False) -> None:
        self.scope = llm(model, provider=provider, streaming=streaming)

    def start(self) -> None:
        self.scope._start()

    def activate(self) -> None:
        self.scope._activate()

    def deactivate(self) -> None:
        self.scope._deactivate()

    def finish(self, exc: BaseException | None) -> None:
        self.scope._finish(exc)

    @property
    def context(self) -> otel_context.Context | None:
        """The span's context, for propagation (``traceparent``) to the server."""
        return self.scope._ctx

    @property
    def started_at(self) -> float:
        """``time.monotonic()`` when the span started (TTFT counts from here)."""
        return self.scope._started_at
