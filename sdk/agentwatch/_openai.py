"""Auto-instrumentation of the OpenAI Python client's chat completions (sync and async).

Any OpenAI-compatible server (vLLM, the simulated engine, OpenAI) is traced with no code
change: model, input/output/cached tokens, finish reasons, and for streams the time to the
first content or tool-call chunk (TTFT) and the time per output token after it (TPOT).
Streams ask for usage in their last chunk (``stream_options={"include_usage": True}``)
unless the caller chose ``stream_options``; that extra usage-only chunk is then not shown to
the caller, who sees exactly the chunks they would have seen without the SDK. A W3C
``traceparent`` header joins the engine's own spans to the trace.

Not covered: ``chat.completions.parse``/``.stream`` helpers and the Responses API (they
bypass ``create``); ``with_raw_response`` calls get a span without usage.

It is the ``openai`` integration (``_integrations.Integration``), registered when this module is
imported. The import is guarded (no ``openai`` installed: nothing happens) and versions older than
``MIN_VERSION`` are left alone with a warning. Wrappers pass straight through when tracing
is off or suppressed, and a bug of ours falls back to the plain call; only the user's
errors and ``BudgetExceeded`` reach the caller.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from . import semconv as sc
from ._budget import BudgetExceeded
from ._config import Config, logger
from ._decorators import llm
from ._integrations import LlmCall, capturing_content, register, tracing_active
from ._stats import internal_error

MIN_VERSION = (1, 40)
_PROPAGATOR = TraceContextTextMapPropagator()
_REQUEST_ATTRIBUTES = {
    "temperature": sc.GEN_AI_REQUEST_TEMPERATURE,
    "max_tokens": sc.GEN_AI_REQUEST_MAX_TOKENS,
    "max_completion_tokens": sc.GEN_AI_REQUEST_MAX_TOKENS,
    "top_p": sc.GEN_AI_REQUEST_TOP_P,
    "n": sc.GEN_AI_REQUEST_N,
}


def instrument_openai() -> bool:
    """Patch ``Completions.create`` and ``AsyncCompletions.create``; True when instrumented."""
    try:
        import openai
        from openai.resources.chat.completions import AsyncCompletions, Completions
    except ImportError:
        logger.debug("agentwatch: openai is not installed; OpenAI instrumentation off")
        return False
    if _version_tuple(getattr(openai, "__version__", "0")) < MIN_VERSION:
        logger.warning(
            "agentwatch: openai %s is older than %s; not instrumented",
            openai.__version__,
            ".".join(map(str, MIN_VERSION)),
        )
        return False
    if not getattr(Completions.create, "__agentwatch__", False):
        setattr(Completions, "create", _wrap_sync(Completions.create))  # noqa: B010 (mypy: no method assignment)
        setattr(AsyncCompletions, "create", _wrap_async(AsyncCompletions.create))  # noqa: B010
    return True


class OpenAIIntegration:
    """``Integration`` for the ``openai`` client; ``init(instrument_openai=False)`` leaves it off."""

    name = "openai"

    def enabled(self, config: Config) -> bool:
        return config.instrument_openai

    def setup(self) -> bool:
        return instrument_openai()

    def teardown(self) -> None:
        uninstrument_openai()


register(OpenAIIntegration())


def uninstrument_openai() -> None:
    """Put the original methods back (tests, or a user who wants the plain client)."""
    try:
        from openai.resources.chat.completions import AsyncCompletions, Completions
    except ImportError:
        return
    for cls in (Completions, AsyncCompletions):
        original = getattr(cls.create, "__wrapped__", None)
        if getattr(cls.create, "__agentwatch__", False) and original is not None:
            setattr(cls, "create", original)  # noqa: B010


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _wrap_sync(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not tracing_active():
            return original(self, *args, **kwargs)
        call = _begin(self, kwargs)
        if call is None:
            return original(self, *args, **kwargs)
        call.span.activate()
        try:
            result = original(self, *args, **call.kwargs)
        except BaseException as exc:
            call.span.deactivate()
            call.span.finish(exc)
            raise
        call.span.deactivate()
        return call.wrap_result(result)

    create.__agentwatch__ = True  # type: ignore[attr-defined]
    return create


def _wrap_async(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def create(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not tracing_active():
            return await original(self, *args, **kwargs)
        call = _begin(self, kwargs)
        if call is None:
            return await original(self, *args, **kwargs)
        call.span.activate()
        try:
            result = await original(self, *args, **call.kwargs)
        except BaseException as exc:
            call.span.deactivate()
            call.span.finish(exc)
            raise
        call.span.deactivate()
        return call.wrap_result(result)

    create.__agentwatch__ = True  # type: ignore[attr-defined]
    return create


def _begin(resource: Any, kwargs: dict[str, Any]) -> _Call | None:
    """Open the LLM span; None (plain call) if our code fails; BudgetExceeded propagates."""
    try:
        span = LlmCall(str(kwargs.get("model", "")), provider=_provider(resource), streaming=bool(kwargs.get("stream")))
        span.start()
    except BudgetExceeded:
        raise
    except Exception as exc:
        internal_error("starting an OpenAI span", exc)
        return None
    try:
        return _Call(span, kwargs)
    except Exception as exc:
        internal_error("preparing an OpenAI request", exc)
        span.finish(None)
        return None


def _provider(resource: Any) -> str | None:
    base_url = str(getattr(getattr(resource, "_client", None), "base_url", "") or "")
    return "openai" if urlsplit(base_url).hostname == "api.openai.com" else None


class _Call:
    """One ``create()``: the span, the adjusted arguments, and what the response says."""

    def __init__(self, span: LlmCall, kwargs: dict[str, Any]) -> None:
        self.streaming = bool(kwargs.get("stream"))
        self.span = span
        self.scope = span.scope
        self.kwargs = dict(kwargs)
        self.hide_usage_chunk = False
        if self.streaming and kwargs.get("stream_options") is None:
            self.kwargs["stream_options"] = {"include_usage": True}
            self.hide_usage_chunk = True
        headers = dict(kwargs.get("extra_headers") or {})
        _PROPAGATOR.inject(headers, context=self.span.context)
        self.kwargs["extra_headers"] = headers
        self._record_request(kwargs)

    def _record_request(self, kwargs: dict[str, Any]) -> None:
        span = self.scope.span
        assert span is not None
        for key, name in _REQUEST_ATTRIBUTES.items():
            value = kwargs.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                span.set_attribute(name, value)
        if "messages" in kwargs:
            self.scope.record_messages(input=kwargs["messages"])

    def wrap_result(self, result: Any) -> Any:
        from openai import AsyncStream, Stream  # present: only instrumented clients get here

        try:
            if isinstance(result, AsyncStream):
                return AsyncTracedStream(result, _StreamObserver(self))
            if isinstance(result, Stream):
                return TracedStream(result, _StreamObserver(self))
            self._record_response(result)  # a raw-response wrapper's result records nothing
        except Exception as exc:
            internal_error("recording an OpenAI response", exc)
        self.span.finish(None)
        return result

    def _record_response(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        finish = [c.finish_reason for c in getattr(response, "choices", None) or () if c.finish_reason]
        self.scope.record_usage(model=getattr(response, "model", None), finish_reason=finish or None)
        if usage is not None:
            _record_token_usage(self.scope, usage)
        self._set_response_id(getattr(response, "id", None))
        choices = getattr(response, "choices", None)
        if choices:
            self.scope.record_messages(output=[getattr(c, "message", None) for c in choices])

    def _set_response_id(self, response_id: object) -> None:
        if isinstance(response_id, str) and response_id and self.scope.span is not None:
            self.scope.span.set_attribute(sc.GEN_AI_RESPONSE_ID, response_id)


def _record_token_usage(scope: llm, usage: Any) -> None:
    details = getattr(usage, "prompt_tokens_details", None)
    scope.record_usage(
        input_tokens=getattr(usage, "prompt_tokens", None) or 0,
        output_tokens=getattr(usage, "completion_tokens", None) or 0,
        cached_tokens=getattr(details, "cached_tokens", None) or 0,
    )


class _StreamObserver:
    """Looks at each chunk on its way to the caller: first-token time, usage, finish."""

    def __init__(self, call: _Call) -> None:
        self.call = call
        self.first: float | None = None
        self.last: float | None = None
        self.token_chunks = 0
        self.usage: Any = None
        self.finish: list[str] = []
        self.text: list[str] = []
        self.tool_calls: dict[int, dict[str, str]] = {}
        self.id_seen = False
        self.done = False

    def observe(self, chunk: Any) -> bool:
        """Record the chunk; False when the caller should not see it (our usage-only chunk)."""
        try:
            return self._observe(chunk)
        except Exception as exc:
            internal_error("observing an OpenAI stream chunk", exc)
            return True

    def _observe(self, chunk: Any) -> bool:
        now = time.monotonic()
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage
        if getattr(chunk, "model", None):
            self.call.scope.response_model = chunk.model
        choices = getattr(chunk, "choices", None) or ()
        for choice in choices:
            self._observe_choice(choice, now)
        if not self.id_seen and getattr(chunk, "id", None):
            self.id_seen = True
            self.call._set_response_id(chunk.id)
        return not (self.call.hide_usage_chunk and usage is not None and not choices)

    def _observe_choice(self, choice: Any, now: float) -> None:
        delta = getattr(choice, "delta", None)
        content = getattr(delta, "content", None)
        tool_calls = getattr(delta, "tool_calls", None)
        if content or tool_calls:
            self.first = self.first or now
            self.last = now
            self.token_chunks += 1
        if content and capturing_content():
            self.text.append(content)
        for tc in tool_calls or ():
            self._observe_tool_call(tc)
        if getattr(choice, "finish_reason", None):
            self.finish.append(choice.finish_reason)

    def _observe_tool_call(self, tc: Any) -> None:
        if not capturing_content():
            return
        entry = self.tool_calls.setdefault(getattr(tc, "index", 0) or 0, {"name": "", "arguments": ""})
        function = getattr(tc, "function", None)
        entry["name"] += getattr(function, "name", None) or ""
        entry["arguments"] += getattr(function, "arguments", None) or ""

    def finish_span(self, exc: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        scope = self.call.scope
        try:
            self._record_stream_usage(scope)
        except Exception as bug:
            internal_error("finishing an OpenAI stream span", bug)
        self.call.span.finish(exc)

    def _record_stream_usage(self, scope: llm) -> None:
        if self.usage is not None:
            _record_token_usage(scope, self.usage)
        else:  # no usage reported: one content chunk is about one token (vLLM streams so)
            scope.record_usage(output_tokens=self.token_chunks)
        if self.first is not None:
            scope.record_usage(ttft=self.first - self.call.span.started_at)
            if self.last is not None and scope.output_tokens > 1:
                scope.tpot = (self.last - self.first) / (scope.output_tokens - 1)
        if self.finish:
            scope.record_usage(finish_reason=self.finish)
        if self.text or self.tool_calls:
            message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text)}
            if self.tool_calls:
                message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
            scope.record_messages(output=[message])


class _StreamProxy:
    """What both stream wrappers share: the wrapped stream's attributes, and a span that ends
    even when the caller drops the stream without exhausting or closing it."""

    def __init__(self, stream: Any, observer: _StreamObserver) -> None:
        self._stream = stream
        self._observer = observer

    def __del__(self) -> None:
        observer = self.__dict__.get("_observer")
        if observer is not None:
            observer.finish_span(None)

    def __getattr__(self, name: str) -> Any:
        if name in ("_stream", "_observer"):  # not yet set (a failed __init__): no recursion
            raise AttributeError(name)
        return getattr(self._stream, name)


class TracedStream(_StreamProxy):
    """The caller's stream, unchanged to look at; the span ends when it is exhausted or closed."""

    _iterator: Iterator[Any] | None = None

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self._iterator is None:
            self._iterator = iter(self._stream)
        while True:
            try:
                chunk = next(self._iterator)
            except StopIteration:
                self._observer.finish_span(None)
                raise
            except BaseException as exc:
                self._observer.finish_span(exc)
                raise
            if self._observer.observe(chunk):
                return chunk

    def __enter__(self) -> TracedStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._observer.finish_span(None)


class AsyncTracedStream(_StreamProxy):
    """Async twin of ``TracedStream``."""

    _aiterator: AsyncIterator[Any] | None = None

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        if self._aiterator is None:
            self._aiterator = self._stream.__aiter__()
        while True:
            try:
                chunk = await self._aiterator.__anext__()
            except StopAsyncIteration:
                self._observer.finish_span(None)
                raise
            except BaseException as exc:
                self._observer.finish_span(exc)
                raise
            if self._observer.observe(chunk):
                return chunk

    async def __aenter__(self) -> AsyncTracedStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        try:
            await self._stream.close()
        finally:
            self._observer.finish_span(None)
