"""``run``, ``step``, ``llm`` and ``tool``: each a decorator and a (sync or async) context manager.

A scope object opens one span. As a context manager it is used once; as a decorator it is a
template cloned for every call, so one decorated function may run concurrently. For
generator and async-generator functions the span covers the whole iteration, and the span is
made current only while the generator body runs (each resume), never while the consumer
holds the iterator, so contexts do not leak between them.

Step indexing: ``step()`` takes the run's next index; an ``llm()`` call outside any step is a
step of its own (ReAct loops without explicit steps still get one index per LLM call); a
``tool()`` belongs to the enclosing step, or to the run's latest step. Every child span
carries the run's agent name and its step index, so the collector aggregates without joins.

Errors: the user's exception is recorded (``error.type``, status, an ``exception`` event with
type, message and stack) and re-raised unchanged. Timeouts (``TimeoutError``,
``asyncio.TimeoutError``, any ``*Timeout*`` exception type such as ``openai.APITimeoutError``,
or a tool's own ``timeout=``) also set ``agentwatch.timeout=true``.

Run outcome: ``run.set_outcome(...)`` wins; otherwise a run refused before any work
(``record_lever(..., refused=True)``) is ``refused``, one that passed its budget is
``abandoned``, one that raised is ``failure``, one that returned is ``success``.
"""

from __future__ import annotations

import abc
import asyncio
import contextvars
import functools
import inspect
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator, Sequence
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from . import semconv as sc
from ._budget import Budget, BudgetExceeded, BudgetLeft
from ._llm_attributes import current_llm_attributes
from ._stats import COUNTERS, internal_error
from ._tracing import STATE

F = TypeVar("F", bound=Callable[..., Any])

_RUN: contextvars.ContextVar[Run | None] = contextvars.ContextVar("agentwatch_run", default=None)
_STEP: contextvars.ContextVar[int | None] = contextvars.ContextVar("agentwatch_step", default=None)


class Run:
    """Handle of a running (or finished) agent run: ids for feedback, totals, outcome."""

    def __init__(self, name: str, budget: Budget | None, span: Span, version: str | None = None) -> None:
        ctx = span.get_span_context()
        self.name = name
        self.version = version  # the run's own agent version, else the process's (service.version)
        self.trace_id = format(ctx.trace_id, "032x")
        self.span_id = format(ctx.span_id, "016x")
        self.budget = budget
        self.started = time.monotonic()
        self.steps = 0
        self.llm_calls = 0
        self.tool_calls = 0
        self.cost_usd = 0.0
        self.outcome: str | None = None
        self.outcome_reason = ""
        self.budget_exceeded: str | None = None
        self.degraded = False  # set by agentwatch.record_lever("degradation", ...)
        self.refused = ""  # why it was refused before any work: set by record_lever(..., refused=True)
        self._lock = threading.Lock()

    def set_outcome(self, outcome: str, reason: str = "") -> None:
        """Mark the task's result, independent of exceptions: success, failure, abandoned, or
        refused (turned away before any work by a rate limit or a budget: not counted as a run)."""
        if outcome not in sc.OUTCOMES:
            raise ValueError(f"set_outcome({outcome!r}): outcome must be one of {', '.join(sc.OUTCOMES)}")
        self.outcome, self.outcome_reason = outcome, str(reason)

    @property
    def elapsed_s(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started

    def budget_left(self) -> BudgetLeft:
        """What the run may still spend before its budget stops it (None: no limit there)."""
        budget = self.budget or Budget()
        return BudgetLeft(
            cost_usd=None if budget.max_cost_usd is None else budget.max_cost_usd - self.cost_usd,
            steps=None if budget.max_steps is None else budget.max_steps - self.steps,
            seconds=None if budget.max_seconds is None else budget.max_seconds - self.elapsed_s,
        )

    def budget_used(self) -> float | None:
        """The largest share of any limit spent so far (1.0: at the limit); None without limits."""
        budget = self.budget
        if budget is None:
            return None
        shares = [
            used / limit
            for used, limit in (
                (self.cost_usd, budget.max_cost_usd),
                (self.steps, budget.max_steps),
                (self.elapsed_s, budget.max_seconds),
            )
            if limit
        ]
        return max(shares) if shares else None

    def add_cost(self, usd: float) -> None:
        """Add a cost the SDK cannot see (a paid API called by a tool) to the run and its budget."""
        with self._lock:
            self.cost_usd += usd

    def _next_step(self) -> int:
        with self._lock:
            self.steps += 1
            return self.steps - 1

    def _count_llm_call(self, cost_usd: float) -> None:
        with self._lock:
            self.llm_calls += 1
            self.cost_usd += cost_usd

    def _count_tool_call(self) -> None:
        with self._lock:
            self.tool_calls += 1

    def _check_budget(self, extra_steps: int = 0) -> None:
        """Raise ``BudgetExceeded`` before a call if a limit is already passed."""
        if self.budget is None:
            return
        exceeded = self.budget.check(self.cost_usd, self.steps + extra_steps, time.monotonic() - self.started)
        if exceeded is not None:
            self.budget_exceeded = exceeded.limit
            COUNTERS.add("budget_exceeded")
            raise exceeded

    def __repr__(self) -> str:
        return f"<agentwatch.Run {self.name!r} trace_id={self.trace_id} steps={self.steps} cost=${self.cost_usd:.6f}>"


def current_run() -> Run | None:
    """The innermost run around the caller, or None (e.g. to send feedback for it later)."""
    return _RUN.get()


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or any("Timeout" in cls.__name__ for cls in type(exc).__mro__)


def error_type(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def record_error(span: Span, exc: BaseException) -> None:
    """Type, message and stack on the span; timeouts flagged apart from other errors."""
    attributes: dict[str, Any] = {sc.ERROR_TYPE: error_type(exc)}
    if is_timeout(exc):
        attributes[sc.AW_TIMEOUT] = True
    span.set_attributes(attributes)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    span.record_exception(exc)


class _Scope(abc.ABC):
    """One span around a block, a call or a whole (async) iteration."""

    kind = sc.KIND_OTHER

    def __init__(self) -> None:
        self._span: Span | None = None
        self._ctx: otel_context.Context | None = None
        self._tokens: tuple[object, ...] = ()
        self._run: Run | None = None

    # -- what each kind defines ---------------------------------------------------------
    @abc.abstractmethod
    def _clone(self) -> _Scope:
        """Defined by each kind of span."""

    @abc.abstractmethod
    def _span_name(self) -> str:
        """Defined by each kind of span."""

    @abc.abstractmethod
    def _attributes(self) -> dict[str, Any]:
        """Defined by each kind of span."""

    def _after_start(self) -> None:
        """Hook: runs once the span exists."""
        return None  # optional: a no-op unless a kind overrides it

    def _before_end(self, exc: BaseException | None) -> None:
        """Hook: last attributes before the span ends."""
        return None  # optional: a no-op unless a kind overrides it

    def _handle(self) -> Any:
        return self

    def _capture_call(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        """Hook: decorated call's arguments (only tools record them)."""
        return None  # optional: a no-op unless a kind overrides it

    def _capture_result(self, result: Any) -> None:
        """Hook: decorated call's result (only tools record it)."""
        return None  # optional: a no-op unless a kind overrides it

    def _check_sync(self) -> None:
        """Hook: refuse options that sync code cannot honour (a tool's timeout)."""
        return None  # optional: a no-op unless a kind overrides it

    # -- lifecycle -------------------------------------------------------------------------
    def _start(self) -> None:
        if self._span is not None:
            raise RuntimeError(f"agentwatch.{self.kind}() context manager entered twice; create a new one")
        self._run = _RUN.get()
        try:
            attributes = self._attributes()  # may raise BudgetExceeded: before any span exists
        except BudgetExceeded:
            raise
        except Exception as bug:  # ours: the user's code still runs, in a bare span
            internal_error(f"starting a {self.kind} span", bug)
            attributes = {}
        span = STATE.tracer.start_span(self._span_name(), attributes=attributes)
        self._span = span
        self._ctx = trace.set_span_in_context(span)
        COUNTERS.add("spans_started")
        self._after_start()

    def _activate(self) -> None:
        self._tokens = (otel_context.attach(self._ctx), *self._set_vars())  # type: ignore[arg-type]

    def _set_vars(self) -> tuple[object, ...]:
        return ()

    def _deactivate(self) -> None:
        tokens, self._tokens = self._tokens, ()
        if not tokens:
            return
        self._reset_vars(tokens[1:])
        otel_context.detach(tokens[0])  # type: ignore[arg-type]

    def _reset_vars(self, tokens: Sequence[object]) -> None:
        return None

    def _finish(self, exc: BaseException | None) -> None:
        span = self._span
        if span is None:
            return
        try:
            if exc is not None:
                record_error(span, exc)
            self._before_end(exc)
        except Exception as bug:
            internal_error(f"ending a {self.kind} span", bug)
        span.end()

    # -- context manager protocol ------------------------------------------------------------
    def __enter__(self) -> Any:
        self._start()
        self._activate()
        return self._handle()

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self._deactivate()
        self._finish(exc)

    async def __aenter__(self) -> Any:
        return self.__enter__()

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- decorator -------------------------------------------------------------------------
    def __call__(self, fn: F) -> F:
        if inspect.isasyncgenfunction(fn):
            return _wrap_async_gen(self, fn)  # type: ignore[return-value]
        if inspect.iscoroutinefunction(fn):
            return _wrap_async(self, fn)  # type: ignore[return-value]
        if inspect.isgeneratorfunction(fn):
            return _wrap_gen(self, fn)  # type: ignore[return-value]
        if not callable(fn):
            raise TypeError(f"agentwatch.{self.kind}() decorates a function, got {fn!r}")
        return _wrap_sync(self, fn)  # type: ignore[return-value]


def _wrap_sync(template: _Scope, fn: Callable[..., Any]) -> Callable[..., Any]:
    template._check_sync()

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        scope = template._clone()
        with scope:
            scope._capture_call(args, kwargs)
            result = fn(*args, **kwargs)
            scope._capture_result(result)
            return result

    return wrapper


def _wrap_async(template: _Scope, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        scope = template._clone()
        async with scope:
            scope._capture_call(args, kwargs)
            result = await fn(*args, **kwargs)
            scope._capture_result(result)
            return result

    return wrapper


def _wrap_gen(template: _Scope, fn: Callable[..., Generator[Any, Any, Any]]) -> Callable[..., Any]:
    template._check_sync()

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        scope = template._clone()
        scope._start()
        scope._capture_call(args, kwargs)
        return _traced_gen(scope, fn(*args, **kwargs))

    return wrapper


def _traced_gen(scope: _Scope, gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """Drive ``gen`` with the span current during each resume only."""
    error: BaseException | None = None
    try:
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            scope._activate()
            try:
                item = gen.throw(thrown) if thrown is not None else gen.send(sent)
            except StopIteration as stop:
                return stop.value
            finally:
                scope._deactivate()
            sent, thrown = None, None
            try:
                sent = yield item
            except GeneratorExit:
                gen.close()
                raise
            except BaseException as exc:  # consumer's throw(): forward it into the generator
                thrown = exc
    except GeneratorExit:
        raise
    except BaseException as exc:
        error = exc
        raise
    finally:
        scope._finish(error)


def _wrap_async_gen(template: _Scope, fn: Callable[..., AsyncGenerator[Any, Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        scope = template._clone()
        scope._start()
        scope._capture_call(args, kwargs)
        return _traced_async_gen(scope, fn(*args, **kwargs))

    return wrapper


async def _traced_async_gen(scope: _Scope, gen: AsyncGenerator[Any, Any]) -> AsyncGenerator[Any, Any]:
    error: BaseException | None = None
    try:
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            scope._activate()
            try:
                item = await (gen.athrow(thrown) if thrown is not None else gen.asend(sent))
            except StopAsyncIteration:
                return
            finally:
                scope._deactivate()
            sent, thrown = None, None
            try:
                sent = yield item
            except GeneratorExit:
                await gen.aclose()
                raise
            except BaseException as exc:
                thrown = exc
    except GeneratorExit:
        raise
    except BaseException as exc:
        error = exc
        raise
    finally:
        scope._finish(error)


def _set_content(span: Span | None, key: str, value: Any) -> None:
    """Captured content, redacted, only when capture is on; a value we cannot render is skipped."""
    redactor = STATE.redactor
    if redactor is None or span is None:
        return
    try:
        span.set_attribute(key, redactor(value))
    except Exception as bug:
        internal_error(f"capturing {key}", bug)


def _child_attributes(run: Run | None, step_index: int | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    if run is not None:
        attributes[sc.GEN_AI_AGENT_NAME] = run.name
        if run.version:
            attributes[sc.SERVICE_VERSION] = run.version
    if step_index is not None:
        attributes[sc.AW_STEP_INDEX] = step_index
    return attributes


class run(_Scope):  # noqa: N801 - used as agentwatch.run(...), like a function
    """An agent run (one task): ``gen_ai.operation.name=invoke_agent``, totals and outcome."""

    kind = sc.KIND_RUN

    def __init__(
        self,
        name: str,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        tags: Sequence[str] | None = None,
        budget: Budget | None = None,
        version: str | None = None,
    ) -> None:
        """``version``: the agent's version for this run (OpenTelemetry ``service.version`` on
        its spans), over the process's ``init(service_version=...)``: runs are compared per version."""
        super().__init__()
        if not isinstance(name, str) or not name:
            raise ValueError(f"run(name=...): a non-empty string is required, got {name!r}")
        if budget is not None and not isinstance(budget, Budget):
            raise ValueError(f"run(budget=...): expected agentwatch.Budget, got {budget!r}")
        if version is not None and not isinstance(version, str):
            raise ValueError(f"run(version=...): expected a string, got {version!r}")
        self.name, self.user_id, self.session_id = name, user_id, session_id
        self.tags, self.budget, self.version = list(tags or ()), budget, version or None
        self._handle_obj: Run | None = None

    def _clone(self) -> run:
        return run(
            self.name,
            user_id=self.user_id,
            session_id=self.session_id,
            tags=self.tags,
            budget=self.budget,
            version=self.version,
        )

    def _span_name(self) -> str:
        return f"{sc.OP_INVOKE_AGENT} {self.name}"

    def _attributes(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            sc.AGENTWATCH_SPAN_KIND: sc.KIND_RUN,
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: self.name,
        }
        optional: dict[str, AttributeValue | None] = {
            sc.USER_ID: self.user_id,
            sc.SESSION_ID: self.session_id,
            sc.GEN_AI_CONVERSATION_ID: self.session_id,
            sc.AW_RUN_TAGS: self.tags or None,
            sc.SERVICE_VERSION: self.version,
        }
        if self.budget is not None:
            optional.update(
                {
                    sc.AW_BUDGET_MAX_COST_USD: self.budget.max_cost_usd,
                    sc.AW_BUDGET_MAX_STEPS: self.budget.max_steps,
                    sc.AW_BUDGET_MAX_SECONDS: self.budget.max_seconds,
                }
            )
        attributes.update({k: v for k, v in optional.items() if v is not None})
        return attributes

    def _after_start(self) -> None:
        self._handle_obj = Run(self.name, self.budget, self._span, self.version)  # type: ignore[arg-type]
        self._mark_start()

    def _mark_start(self) -> None:
        """A zero-length ``agentwatch.run.start`` child span, exported at the next batch: the
        run span itself is exported only when it ends, and a long run should be visible while
        it runs (the collector lists the run from this span on)."""
        try:
            now = time.time_ns()
            attributes: dict[str, AttributeValue] = {
                sc.AW_RUN_START: True,
                sc.AW_RUN_NAME: self._span_name(),
                sc.GEN_AI_AGENT_NAME: self.name,
            }
            optional = (
                (sc.USER_ID, self.user_id),
                (sc.SESSION_ID, self.session_id),
                (sc.SERVICE_VERSION, self.version),
            )
            attributes.update({k: v for k, v in optional if v is not None})
            STATE.tracer.start_span(sc.AW_RUN_START, context=self._ctx, start_time=now, attributes=attributes).end(
                end_time=now
            )
            COUNTERS.add("spans_started")
        except Exception as bug:  # ours: the run goes on without its start marker
            internal_error("marking a run's start", bug)

    def _handle(self) -> Run | None:
        return self._handle_obj

    @property
    def handle(self) -> Run | None:
        """The ``Run`` once started (also what ``with agentwatch.run(...) as r`` gives)."""
        return self._handle_obj

    def _set_vars(self) -> tuple[object, ...]:
        return (_RUN.set(self._handle_obj), _STEP.set(None))

    def _reset_vars(self, tokens: Sequence[object]) -> None:
        _STEP.reset(tokens[1])  # type: ignore[arg-type]
        _RUN.reset(tokens[0])  # type: ignore[arg-type]

    def _before_end(self, exc: BaseException | None) -> None:
        handle = self._handle_obj
        assert handle is not None  # set in _after_start
        if isinstance(exc, BudgetExceeded):
            handle.budget_exceeded = handle.budget_exceeded or exc.limit
        outcome, reason = _outcome(handle, exc)
        attributes: dict[str, Any] = {
            sc.AW_RUN_STEPS: handle.steps,
            sc.AW_RUN_LLM_CALLS: handle.llm_calls,
            sc.AW_RUN_TOOL_CALLS: handle.tool_calls,
            sc.AW_RUN_COST_USD: handle.cost_usd,
            sc.AW_RUN_OUTCOME: outcome,
        }
        if reason:
            attributes[sc.AW_RUN_OUTCOME_REASON] = reason
        if handle.budget_exceeded:
            attributes[sc.AW_BUDGET_EXCEEDED] = handle.budget_exceeded
        if handle.degraded:
            attributes[sc.AW_RUN_DEGRADED] = True
        self._span.set_attributes(attributes)  # type: ignore[union-attr]
        handle.outcome, handle.outcome_reason = outcome, reason


def _outcome(handle: Run, exc: BaseException | None) -> tuple[str, str]:
    if handle.outcome is not None:
        return handle.outcome, handle.outcome_reason
    if handle.refused:
        return sc.OUTCOME_REFUSED, handle.refused
    if handle.budget_exceeded:
        return "abandoned", f"budget exceeded: {handle.budget_exceeded}"
    if exc is not None:
        return "failure", f"{type(exc).__name__}: {exc}"
    return "success", ""


class step(_Scope):  # noqa: N801
    """One step of a run (a think/act iteration); takes the run's next step index."""

    kind = sc.KIND_STEP

    def __init__(self, name: str) -> None:
        super().__init__()
        if not isinstance(name, str) or not name:
            raise ValueError(f"step(name=...): a non-empty string is required, got {name!r}")
        self.name = name
        self.index: int | None = None

    def _clone(self) -> step:
        return step(self.name)

    def _span_name(self) -> str:
        return f"step {self.name}"

    def _attributes(self) -> dict[str, Any]:
        self.index = self._run._next_step() if self._run is not None else None
        attributes = _child_attributes(self._run, self.index)
        attributes[sc.AGENTWATCH_SPAN_KIND] = sc.KIND_STEP
        attributes[sc.AW_STEP_NAME] = self.name
        return attributes

    def _set_vars(self) -> tuple[object, ...]:
        return (_STEP.set(self.index),)

    def _reset_vars(self, tokens: Sequence[object]) -> None:
        _STEP.reset(tokens[0])  # type: ignore[arg-type]


class llm(_Scope):  # noqa: N801
    """An LLM call the SDK does not instrument itself; record its usage on the handle.

    ``with agentwatch.llm(model="m") as call: ...; call.record_usage(input_tokens=...)``.
    Cost is priced from the SDK's price table when the span ends and added to the run.
    """

    kind = sc.KIND_LLM

    def __init__(
        self,
        model: str = "",
        *,
        provider: str | None = None,
        operation: str = sc.OP_CHAT,
        streaming: bool | None = None,
    ) -> None:
        super().__init__()
        self.model, self.provider, self.operation, self.streaming = model, provider, operation, streaming
        self.response_model = ""
        self.input_tokens = self.output_tokens = self.cached_tokens = 0
        self.ttft: float | None = None
        self.tpot: float | None = None  # set by instrumentations that time every token
        self.finish_reasons: list[str] = []
        self.cost_usd = 0.0
        self._started_at = 0.0

    def _clone(self) -> llm:
        return llm(self.model, provider=self.provider, operation=self.operation, streaming=self.streaming)

    def _span_name(self) -> str:
        return f"{self.operation} {self.model}".rstrip()

    def _attributes(self) -> dict[str, Any]:
        run_, step_index = self._run, _STEP.get()
        if run_ is not None:
            run_._check_budget(extra_steps=1 if step_index is None else 0)
            if step_index is None:
                step_index = run_._next_step()
        attributes = {**current_llm_attributes(), **_child_attributes(run_, step_index)}  # ours win
        attributes[sc.AGENTWATCH_SPAN_KIND] = sc.KIND_LLM
        attributes[sc.GEN_AI_OPERATION_NAME] = self.operation
        if self.model:
            attributes[sc.GEN_AI_REQUEST_MODEL] = self.model
        if self.provider:
            attributes[sc.GEN_AI_PROVIDER_NAME] = self.provider
        if self.streaming is not None:
            attributes[sc.AW_STREAMING] = self.streaming
        return attributes

    def _after_start(self) -> None:
        self._started_at = time.monotonic()

    @property
    def span(self) -> Span | None:
        return self._span

    def record_usage(
        self,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cached_tokens: int | None = None,
        ttft: float | None = None,
        model: str | None = None,
        finish_reason: str | Sequence[str] | None = None,
    ) -> None:
        """Token counts, time to first token (seconds), response model, finish reason(s)."""
        for name, value in (
            ("input_tokens", input_tokens),
            ("output_tokens", output_tokens),
            ("cached_tokens", cached_tokens),
        ):
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"record_usage({name}={value!r}): expected a non-negative int")
                setattr(self, name, value)
        if ttft is not None:
            self.ttft = float(ttft)
        if model:
            self.response_model = model
        if finish_reason:
            self.finish_reasons = [finish_reason] if isinstance(finish_reason, str) else list(finish_reason)

    def record_messages(self, *, input: object = None, output: object = None) -> None:  # noqa: A002
        """Prompt and completion content; kept only when capture_content is on (redacted)."""
        if input is not None:
            _set_content(self._span, sc.GEN_AI_INPUT_MESSAGES, input)
        if output is not None:
            _set_content(self._span, sc.GEN_AI_OUTPUT_MESSAGES, output)

    def _before_end(self, exc: BaseException | None) -> None:
        model = self.response_model or self.model
        self.cost_usd = (
            STATE.prices.cost(model, self.input_tokens, self.output_tokens, self.cached_tokens, self.provider)
            if model
            else 0.0
        )
        if self._run is not None:
            self._run._count_llm_call(self.cost_usd)
        self._span.set_attributes(self._usage_attributes(model))  # type: ignore[union-attr]

    def _usage_attributes(self, model: str) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            sc.GEN_AI_USAGE_INPUT_TOKENS: self.input_tokens,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: self.output_tokens,
            sc.AW_COST_USD: self.cost_usd,
            sc.AW_PRICE_VERSION: STATE.prices.version,
        }
        if self.cached_tokens:
            attributes[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = self.cached_tokens
        if self.response_model:
            attributes[sc.GEN_AI_RESPONSE_MODEL] = self.response_model
        if self.finish_reasons:
            attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = self.finish_reasons
        if self.ttft is not None:
            attributes[sc.AW_TTFT] = self.ttft
            if self.tpot is None and self.output_tokens > 1:
                decode = time.monotonic() - self._started_at - self.ttft
                self.tpot = max(decode, 0.0) / (self.output_tokens - 1)
        if self.tpot is not None:
            attributes[sc.AW_TPOT] = self.tpot
        return attributes


class tool(_Scope):  # noqa: N801
    """A tool call: ``gen_ai.operation.name=execute_tool``.

    ``timeout`` (seconds) is enforced on async functions and ``async with`` blocks through
    ``asyncio.timeout``; a sync function cannot be interrupted safely, so asking for a
    timeout there is a ``ValueError`` (give the blocking call its own timeout instead).
    """

    kind = sc.KIND_TOOL

    def __init__(self, name: str, *, timeout: float | None = None, tool_type: str | None = None) -> None:
        super().__init__()
        if not isinstance(name, str) or not name:
            raise ValueError(f"tool(name=...): a non-empty string is required, got {name!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise ValueError(f"tool({name!r}, timeout={timeout!r}): expected a positive number of seconds")
        self.name, self.timeout, self.tool_type = name, timeout, tool_type
        self._timeout_cm: asyncio.Timeout | None = None

    def _clone(self) -> tool:
        return tool(self.name, timeout=self.timeout, tool_type=self.tool_type)

    def _span_name(self) -> str:
        return f"{sc.OP_EXECUTE_TOOL} {self.name}"

    def _attributes(self) -> dict[str, Any]:
        run_, step_index = self._run, _STEP.get()
        if run_ is not None:
            run_._check_budget()
            if step_index is None:
                step_index = max(run_.steps - 1, 0)
        attributes = _child_attributes(run_, step_index)
        attributes[sc.AGENTWATCH_SPAN_KIND] = sc.KIND_TOOL
        attributes[sc.GEN_AI_OPERATION_NAME] = sc.OP_EXECUTE_TOOL
        attributes[sc.GEN_AI_TOOL_NAME] = self.name
        if self.tool_type:  # function | extension | datastore; omitted when not said (saves a span attribute)
            attributes[sc.GEN_AI_TOOL_TYPE] = self.tool_type
        return attributes

    def _before_end(self, exc: BaseException | None) -> None:
        if self._run is not None:
            self._run._count_tool_call()

    def _check_sync(self) -> None:
        if self.timeout is not None:
            raise ValueError(
                f"tool({self.name!r}, timeout=...): only async tools can be timed out; "
                "give the blocking call its own timeout instead"
            )

    def __enter__(self) -> Any:
        self._check_sync()
        return super().__enter__()

    def __call__(self, fn: F) -> F:
        if self.timeout is not None and (inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)):
            raise ValueError(
                f"tool({self.name!r}, timeout=...): a timeout applies to a call, "
                "not to a generator; time out the awaited work inside it instead"
            )
        return super().__call__(fn)

    async def __aenter__(self) -> Any:
        handle = super().__enter__()
        if self.timeout is not None:
            self._timeout_cm = asyncio.timeout(self.timeout)
            await self._timeout_cm.__aenter__()
        return handle

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if self._timeout_cm is not None:
            try:
                await self._timeout_cm.__aexit__(exc_type, exc, tb)  # type: ignore[arg-type]
            except TimeoutError as timed_out:  # our own timeout: cancellation became TimeoutError
                super().__exit__(type(timed_out), timed_out, timed_out.__traceback__)
                raise
        super().__exit__(exc_type, exc, tb)

    def _capture_call(self, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        if STATE.redactor is not None:
            value = {"args": list(args), "kwargs": kwargs} if kwargs else list(args)
            _set_content(self._span, sc.GEN_AI_TOOL_CALL_ARGUMENTS, value)

    def _capture_result(self, result: Any) -> None:
        _set_content(self._span, sc.GEN_AI_TOOL_CALL_RESULT, result)

    def record_result(self, result: Any) -> None:
        """For context-manager use: the tool's result (kept only when capture_content is on)."""
        self._capture_result(result)
