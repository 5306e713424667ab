"""Normalisation: one ``SpanRow`` from a span in any dialect real instrumentations send.

Dialects: the OpenTelemetry GenAI conventions (current names and the older
``gen_ai.system`` / ``gen_ai.usage.prompt_tokens``), OpenInference (Arize Phoenix),
OpenLLMetry (Traceloop), vLLM's ``llm_request`` server spans and agentwatch's own
extensions. Mapped attributes become columns; every other attribute is kept, as text,
in ``SpanRow.attributes``. Long values are truncated with a marker, captured content
is redacted, LLM spans are priced.

This runs once per span at ingestion, so it is written for speed: one pass over the
attributes, dictionary lookups only, no per-span objects beyond the row itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping
from itertools import islice
from typing import Any

from agentwatch import semconv as sc

from agentwatch_platform.collector.ingest import bounds
from agentwatch_platform.collector.ingest.bounds import BadValue
from agentwatch_platform.collector.ingest.redact import Redactor
from agentwatch_platform.collector.storage.model import SpanRow

log = logging.getLogger(__name__)

TRUNCATION_MARKER = "…[truncated {n} chars]"
# Defaults of the per-span bounds (``collector.settings``: AGENTWATCH_MAX_ATTRIBUTE_KEY_LENGTH, ...).
MAX_KEY_LENGTH = 256  # attribute names longer than this are cut (names, not values: no real one is near it)
MAX_ATTRIBUTES = 1024  # unmapped attributes kept per span, and attributes per resource
MAX_EVENTS = 1024  # events kept per span
MAX_EVENT_ATTRIBUTES = 128  # attributes kept per event (OpenTelemetry's SDK default)
MAX_RESOURCE_BYTES = 256 * 1024 * 1024  # resource attributes a request stores, once per span (beyond: 413)

STATUS_CODES = ("unset", "ok", "error")

# Unmapped attributes whose values are captured content: redacted like input/output text.
_CONTENT_PREFIXES = (
    "gen_ai.prompt",
    "gen_ai.completion",
    "llm.input_messages",
    "llm.output_messages",
    "llm.prompts",
    "llm.completions",
    "gen_ai.system_instructions",
    "input.",
    "output.",
    "retrieval.documents",
    "exception.message",
    "traceloop.entity.input",
    "traceloop.entity.output",
)

_OPERATION_KINDS = {
    sc.OP_INVOKE_AGENT: sc.KIND_RUN,
    "create_agent": sc.KIND_RUN,
    sc.OP_CHAT: sc.KIND_LLM,
    sc.OP_TEXT_COMPLETION: sc.KIND_LLM,
    "generate_content": sc.KIND_LLM,
    sc.OP_EMBEDDINGS: sc.KIND_LLM,
    sc.OP_EXECUTE_TOOL: sc.KIND_TOOL,
}
_OPENINFERENCE_KINDS = {
    "LLM": sc.KIND_LLM,
    "EMBEDDING": sc.KIND_LLM,
    "TOOL": sc.KIND_TOOL,
    "RETRIEVER": sc.KIND_RETRIEVAL,
    "RERANKER": sc.KIND_RETRIEVAL,
    "AGENT": sc.KIND_RUN,
    "CHAIN": sc.KIND_STEP,
}
# A traceloop @agent is the agent, under a @workflow or not (its steps are its tasks); like any
# run-kind span it is never billed, so an agent span that sums its calls' tokens counts nothing twice.
_TRACELOOP_KINDS = {"workflow": sc.KIND_RUN, "agent": sc.KIND_RUN, "task": sc.KIND_STEP, "tool": sc.KIND_TOOL}
_KINDS = frozenset(sc.SPAN_KINDS)
_TOKEN_COLUMNS = ("input_tokens", "output_tokens", "cached_tokens")
_INF = float("inf")


def _nstr(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if type(value) is str else _to_text(value)


def _nint(value: Any) -> int | None:
    if value is None or value == "" or type(value) is bool:
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _int32(value: Any) -> int | None:
    """An Int32 column (step index): a value outside it is client nonsense, dropped, never a failed insert."""
    number = _nint(value)
    return number if number is not None and -(2**31) <= number < 2**31 else None


def _float(value: Any) -> float | None:
    if value is None or value == "" or type(value) is bool:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if f == f and f not in (float("inf"), float("-inf")) else None


def _true(value: Any) -> bool | None:
    return True if value is True or value == "true" else None


def _finish_reason(value: Any) -> str | None:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or None
    return _nstr(value)


def _to_text(value: Any) -> str:
    if type(value) is bool:
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, bytes):
        return value.hex()
    if value is None:
        return ""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


_CAPTURED = None  # converter marker: captured content (truncated, then redacted)
_SIGNAL = "@"  # column prefix of kind signals, consumed by _kind()

# attribute -> (column, rank, converter); for a column fed by several attributes the lowest
# rank present wins, so e.g. the response model beats the request model (rank -1: the
# column's only source, no ranking needed).
_SPEC: dict[str, tuple[str, int, Callable[[Any], Any] | None]] = {}


def _map(column: str, convert: Callable[[Any], Any] | None, *keys: str) -> None:
    for rank, key in enumerate(keys):
        _SPEC[key] = (column, rank if len(keys) > 1 else -1, convert)


_map("@kind", _nstr, sc.AGENTWATCH_SPAN_KIND)
_map("@op", _nstr, sc.GEN_AI_OPERATION_NAME)
_map("@oi", _nstr, sc.OPENINFERENCE_SPAN_KIND)
_map("@tl", _nstr, sc.TRACELOOP_SPAN_KIND)
_map("@llm", _nstr, sc.LLM_REQUEST_TYPE)
_map("@project", _nstr, sc.AW_PROJECT)  # the API key decides the project, never the span
_map("model", _nstr, sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL, sc.LLM_MODEL_NAME)
_map("provider", _nstr, sc.GEN_AI_PROVIDER_NAME, sc.GEN_AI_SYSTEM, sc.LLM_PROVIDER, sc.LLM_SYSTEM)
_map(
    "input_tokens",
    bounds.tokens,
    sc.GEN_AI_USAGE_INPUT_TOKENS,
    sc.GEN_AI_USAGE_PROMPT_TOKENS,
    sc.LLM_TOKEN_COUNT_PROMPT,
    sc.LLM_USAGE_PROMPT_TOKENS,
)
_map(
    "output_tokens",
    bounds.tokens,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS,
    sc.GEN_AI_USAGE_COMPLETION_TOKENS,
    sc.LLM_TOKEN_COUNT_COMPLETION,
    sc.LLM_USAGE_COMPLETION_TOKENS,
)
_map(
    "cached_tokens",
    bounds.tokens,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    sc.LLM_TOKEN_COUNT_CACHE_READ,
    "gen_ai.usage.cache_read_input_tokens",
)
_map("agent_name", _nstr, sc.GEN_AI_AGENT_NAME, sc.OI_AGENT_NAME, sc.TRACELOOP_WORKFLOW_NAME)
_map("session_id", _nstr, sc.GEN_AI_CONVERSATION_ID, sc.SESSION_ID)
_map("user_id", _nstr, sc.USER_ID)
_map("service_version", _nstr, sc.SERVICE_VERSION)  # else the resource's (Normalizer.normalize)
_map("error_type", _nstr, sc.ERROR_TYPE)
_map("is_timeout", _true, sc.AW_TIMEOUT)
_map("tool_name", _nstr, sc.GEN_AI_TOOL_NAME, sc.TOOL_NAME)
_map("tool_cache_hit", _true, sc.AW_TOOL_CACHE_HIT)
_map("step_index", _int32, sc.AW_STEP_INDEX)
_map("finish_reason", _finish_reason, sc.GEN_AI_RESPONSE_FINISH_REASONS)
_map("outcome", _nstr, sc.AW_RUN_OUTCOME)
_map("budget_exceeded", _nstr, sc.AW_BUDGET_EXCEEDED)
# The engine records the request id, a client the response id: vLLM answers with its request id,
# so both name the same call and an engine span joins its client LLM span by it.
_map("request_id", _nstr, sc.GEN_AI_REQUEST_ID, sc.GEN_AI_RESPONSE_ID)
# TTFT: then, where none of these is present, openlit's and the stream events' (_stream_latency).
_map(
    "ttft_s", bounds.seconds, sc.AW_TTFT, sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, sc.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN
)
_map("tpot_s", bounds.seconds, sc.AW_TPOT)
_map("queue_s", bounds.seconds, sc.GEN_AI_LATENCY_TIME_IN_QUEUE)
_map("prefill_s", bounds.seconds, sc.GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL)
_map("decode_s", bounds.seconds, sc.GEN_AI_LATENCY_TIME_IN_MODEL_DECODE)
_map("cost_usd", bounds.cost_usd, sc.AW_COST_USD)
_map("price_version", _nstr, sc.AW_PRICE_VERSION)
_map("input_text", _CAPTURED, sc.GEN_AI_INPUT_MESSAGES, sc.INPUT_VALUE, sc.GEN_AI_TOOL_CALL_ARGUMENTS, "gen_ai.prompt")
_map(
    "output_text",
    _CAPTURED,
    sc.GEN_AI_OUTPUT_MESSAGES,
    sc.OUTPUT_VALUE,
    sc.GEN_AI_TOOL_CALL_RESULT,
    "gen_ai.completion",
)
_TOKEN_KEYS = tuple(k for k, spec in _SPEC.items() if spec[0] in _TOKEN_COLUMNS)

# Rules the mapping table cannot express (docs/dialects.md). The native decoder
# declines a span that carries one of these signal values, attributes or events, so the rules
# live here only: a traceloop tool's name is its entity name, a traceloop task inside another
# task or tool (``traceloop.entity.path`` set) is part of that step; openlit's latencies count
# for streamed calls only; TTFT and TPOT come from OpenInference's first-token and traceloop's
# chunk events. (One more, an OpenInference AGENT run without an agent name is named by its
# span name, is mirrored in the native decoder's finish_span: SDK-style run spans carry it.)
# An ``abandoned`` outcome goes through here too (one span per run at most): an older SDK's request
# refused before any work (``agentwatch.lever.refused``) is stored as ``refused`` (_refused).
PYTHON_RULE_SIGNALS: dict[str, frozenset[str]] = {
    sc.TRACELOOP_SPAN_KIND: frozenset({"task", "tool"}),
    sc.AW_RUN_OUTCOME: frozenset({"abandoned"}),
}
PYTHON_RULE_KEYS = (sc.GEN_AI_SERVER_TIME_TO_FIRST_TOKEN, sc.GEN_AI_SERVER_TIME_PER_OUTPUT_TOKEN)
STREAM_EVENTS = frozenset({sc.OI_FIRST_TOKEN_EVENT, sc.TRACELOOP_CHUNK_EVENT})
_NAMED_BY_RULE = frozenset({"AGENT", "task", "tool"})


class Resource:
    """What a span inherits from its OTLP resource, computed once per resource; ``size`` is the
    UTF-8 bytes of its attributes, which every span of the resource stores again."""

    __slots__ = ("service_name", "service_version", "attributes", "size")

    def __init__(self, service_name: str, attributes: dict[str, str]) -> None:
        self.service_name = service_name
        self.service_version = attributes.get(sc.SERVICE_VERSION, "")
        self.attributes = attributes
        self.size = sum(
            len(k.encode("utf-8", "surrogatepass")) + len(v.encode("utf-8", "surrogatepass"))
            for k, v in attributes.items()
        )


Warn = Callable[[str, str], None]
"""(where, why) of a field that was dropped or corrected: a warning in ``partial_success``."""


def _warn(warn: Warn | None, span_id: str, why: str) -> None:
    if warn is not None:
        warn(f"span {span_id}", why)


Pricer = Callable[[str, str, int, int, int], "tuple[float, str] | None"]
"""(model, provider, input, output, cached tokens) -> (cost_usd, price_version); None if unknown."""


def sdk_pricer(prices_file: str = "") -> Pricer:
    """Prices with the SDK's ``agentwatch.PriceTable`` (plus overrides from ``prices_file``)."""
    from agentwatch import PriceTable

    table = PriceTable.from_file(prices_file) if prices_file else PriceTable()
    version = table.version

    def price(model: str, provider: str, inp: int, out: int, cached: int) -> tuple[float, str] | None:
        if table.price(model, provider or None) is None:
            return None
        return table.cost(model, inp, out, cached, provider or None), version

    return price


class Normalizer:
    """Turns decoded spans into ``SpanRow``s; one per collector, shared by every transport.

    Everything a span brings is bounded here, each bound a setting: value length (truncated
    with a marker), name length (cut with a marker), unmapped attributes per span and per
    resource, events per span and attributes per event (the first ones kept). A cut is a
    warning in ``partial_success``; the span is kept. Mapped attributes are never dropped:
    each fills one column, so their number is bounded by the mapping table.
    """

    def __init__(
        self,
        *,
        max_attribute_length: int = 32_768,
        max_key_length: int = MAX_KEY_LENGTH,
        max_attributes: int = MAX_ATTRIBUTES,
        max_events: int = MAX_EVENTS,
        max_event_attributes: int = MAX_EVENT_ATTRIBUTES,
        redactor: Redactor | None = None,
        pricer: Pricer | None = None,
    ) -> None:
        self.max_len = max_attribute_length
        self.max_key_len = max_key_length
        self.max_attributes = max_attributes
        self.max_events = max_events
        self.max_event_attributes = max_event_attributes
        self.redact = redactor if redactor is not None and redactor.active else None
        self.pricer = pricer

    def text(self, value: Any) -> str:
        """An attribute value as stored text: JSON for arrays and maps, truncated with a marker."""
        if type(value) is not str:
            value = _to_text(value)
        if len(value) > self.max_len:
            return value[: self.max_len] + TRUNCATION_MARKER.format(n=len(value) - self.max_len)
        return value

    def captured(self, value: Any) -> str:
        """Captured content (prompts, completions, tool I/O): truncated, then redacted."""
        value = self.text(value)
        return self.redact(value) if self.redact is not None else value

    def normalize(
        self,
        project: str,
        resource: Resource,
        trace_id: str,
        span_id: str,
        parent_span_id: str,
        name: str,
        start_time_ns: int,
        end_time_ns: int,
        status_code: int,
        status_message: str,
        attributes: Collection[tuple[str, Any]],
        events: list[dict[str, Any]] | None = None,
        warn: Warn | None = None,
    ) -> SpanRow:
        """One row; ``attributes`` are (key, Python value) pairs, as decoded from OTLP.

        A value outside its bound (``collector.ingest.bounds``) is dropped and reported to ``warn``
        (where, why), as is an end time before the start (set to the start): the span is kept.
        """
        cols: dict[str, Any] = {}
        ranks: dict[str, int] = {}
        extra: dict[str, str] = {}
        max_len, max_key_len = self.max_len, self.max_key_len
        spec_get = _SPEC.get
        if len(attributes) > self.max_attributes:
            attributes = self._fewer_attributes(attributes, span_id, warn)
        for key, value in attributes:
            spec = spec_get(key)
            if spec is None:
                if type(value) is not str or len(value) > max_len:
                    value = self.text(value)
                if len(key) > max_key_len:  # the native decoder declines these spans
                    _warn(
                        warn,
                        span_id,
                        f"attribute key of {len(key)} characters cut to {max_key_len} (AGENTWATCH_MAX_ATTRIBUTE_KEY_LENGTH)",
                    )
                    key = self._cut_key(key)
                extra[key] = value
                continue
            column, rank, convert = spec
            if rank >= 0 and ranks.get(column, 99) <= rank:
                continue  # a better-ranked attribute already filled this column
            try:
                value = convert(value) if convert is not None else self.captured(value)
            except BadValue as bad:
                _warn(warn, span_id, f"{key} {bad}; dropped")
                continue
            if value is not None:
                cols[column] = value
                if rank >= 0:
                    ranks[column] = rank
        if extra and self.redact is not None:
            self._redact_extra(extra)
        dialect = cols.get("@tl") or cols.get("@oi") if cols else None
        kind = _kind(cols, name, parent_span_id) if cols else sc.KIND_OTHER
        if end_time_ns < start_time_ns:
            _warn(
                warn,
                span_id,
                f"end time {end_time_ns} ns is before the start time {start_time_ns} ns; set to the start time",
            )
            end_time_ns = start_time_ns
        if len(name) > max_len or len(status_message) > max_len:
            name, status_message = self.text(name), self.text(status_message)
        row = SpanRow(
            project,
            trace_id,
            span_id,
            parent_span_id,
            name,
            kind,
            start_time_ns,
            end_time_ns,
            resource.service_name,
            STATUS_CODES[status_code] if 0 <= status_code < 3 else "unset",
            status_message,
            attributes=extra,
            resource=resource.attributes,
            **cols,
        )
        if not row.service_version:
            row.service_version = resource.service_version
        if "decode_s" in cols or "queue_s" in cols:
            self._engine(row, extra)
        if events:
            self._events(row, events, lambda why: _warn(warn, span_id, why))
        elif row.error_type and not row.is_timeout and "timeout" in row.error_type.lower():
            row.is_timeout = True
        if dialect in _NAMED_BY_RULE:
            _names(row, dialect, extra)
        if kind == sc.KIND_LLM and (row.ttft_s is None or row.tpot_s is None) and (events or extra):
            _stream_latency(row, events, extra, lambda why: _warn(warn, span_id, why))
        if (kind == sc.KIND_LLM or kind == sc.KIND_ENGINE) and row.model and self.pricer is not None:
            self._price(row)
        if kind == sc.KIND_ENGINE:
            set_engine_figures_aside(row)
        if row.outcome == "abandoned" and extra.get(sc.AW_LEVER_REFUSED) == "true":
            row.outcome = sc.OUTCOME_REFUSED  # sent by an SDK from before the refused outcome
        return row

    def _fewer_attributes(
        self, attributes: Collection[tuple[str, Any]], span_id: str, warn: Warn | None
    ) -> list[tuple[str, Any]]:
        """The mapped attributes and the first ``max_attributes`` others; the rest are dropped."""
        kept: list[tuple[str, Any]] = []
        others, limit = 0, self.max_attributes
        for pair in attributes:
            if pair[0] in _SPEC:
                kept.append(pair)
            elif others < limit:
                kept.append(pair)
                others += 1
        if len(kept) < len(attributes):
            _warn(
                warn,
                span_id,
                f"{len(attributes) - len(kept)} of {len(attributes)} attributes dropped: at most {limit} "
                "besides the mapped ones are kept (AGENTWATCH_MAX_ATTRIBUTES_PER_SPAN)",
            )
        return kept

    def _cut_key(self, key: str) -> str:
        return key[: self.max_key_len] + TRUNCATION_MARKER.format(n=len(key) - self.max_key_len)

    def bounded(
        self, attrs: dict[str, Any], limit: int, what: str, setting: str, warn: Callable[[str], None] | None
    ) -> dict[str, Any]:
        """``attrs`` with at most ``limit`` entries (the first) and names of at most
        ``max_key_len`` characters (cut with a marker); ``warn`` says what was cut."""
        if len(attrs) > limit:
            if warn is not None:
                warn(f"{what} has {len(attrs)} attributes; the first {limit} kept ({setting})")
            attrs = dict(islice(attrs.items(), limit))
        max_key_len = self.max_key_len
        if any(len(key) > max_key_len for key in attrs):
            if warn is not None:
                longest = max(len(key) for key in attrs)
                warn(
                    f"{what}: attribute key of {longest} characters cut to {max_key_len} (AGENTWATCH_MAX_ATTRIBUTE_KEY_LENGTH)"
                )
            attrs = {self._cut_key(key) if len(key) > max_key_len else key: value for key, value in attrs.items()}
        return attrs

    def resource(self, attrs: dict[str, Any], warn: Callable[[str], None] | None = None) -> Resource:
        """A resource's attributes as stored with each of its spans: bounded like a span's, as text."""
        attrs = self.bounded(attrs, self.max_attributes, "resource", "AGENTWATCH_MAX_ATTRIBUTES_PER_SPAN", warn)
        return Resource(self.text(attrs.get("service.name") or ""), {k: self.text(v) for k, v in attrs.items()})

    def _engine(self, row: SpanRow, extra: dict[str, str]) -> None:
        """Engine timings: TPOT from decode time."""
        if row.tpot_s is None and row.decode_s is not None and row.output_tokens > 1:
            row.tpot_s = row.decode_s / (row.output_tokens - 1)

    def _redact_extra(self, extra: dict[str, str]) -> None:
        redact = self.redact
        assert redact is not None
        for key, value in extra.items():
            if key.startswith(_CONTENT_PREFIXES):
                extra[key] = redact(value)

    def _events(self, row: SpanRow, events: list[dict[str, Any]], warn: Callable[[str], None]) -> None:
        row.events, row.error_type = self.events(events, row.error_type, warn)
        if not row.is_timeout and "timeout" in row.error_type.lower():
            row.is_timeout = True

    def events(
        self, events: list[dict[str, Any]], error_type: str, warn: Callable[[str], None] | None = None
    ) -> tuple[str, str]:
        """(events as JSON, error type): an exception event gives the error type when none was set.

        The first ``max_events`` are stored, each with its first ``max_event_attributes``
        attributes; figures taken from events (TTFT, TPOT) still see them all.
        """
        if len(events) > self.max_events:
            if warn is not None:
                warn(f"{len(events)} events; the first {self.max_events} kept (AGENTWATCH_MAX_EVENTS_PER_SPAN)")
            events = events[: self.max_events]
        limit = self.max_event_attributes
        for event in events:
            attrs = event.get("attributes")
            if not attrs:
                continue
            attrs = self.bounded(
                attrs, limit, f"event {event.get('name')!r:.80}", "AGENTWATCH_MAX_ATTRIBUTES_PER_EVENT", warn
            )
            if event.get("name") == "exception" and not error_type:
                error_type = self.text(attrs.get("exception.type") or "")
            event["attributes"] = {
                k: self.captured(v) if k.startswith(_CONTENT_PREFIXES) else self.text(v) for k, v in attrs.items()
            }
        return json.dumps(events, separators=(",", ":"), ensure_ascii=False), error_type

    def _price(self, row: SpanRow) -> None:
        """The collector's price wins; the SDK's estimate stays when the model is unknown."""
        priced = self.price(row.model, row.provider, row.input_tokens, row.output_tokens, row.cached_tokens)
        if priced is not None:
            row.cost_usd, row.price_version = priced

    def price(
        self, model: str, provider: str, input_tokens: int, output_tokens: int, cached_tokens: int
    ) -> tuple[float, str] | None:
        """(cost_usd, price_version) of an LLM span, or None: unknown model, or no pricer."""
        if self.pricer is None:
            return None
        try:
            priced = self.pricer(model, provider, input_tokens, output_tokens, cached_tokens)
        except Exception:  # a price table bug must not lose the span
            log.exception("pricing failed for model %r", model)
            return None
        if priced is not None and not 0.0 <= priced[0] < _INF:  # a price file's negative or NaN price
            log.error("price of model %r is %r, not a cost; left unpriced", model, priced[0])
            return None
        return priced


def _names(row: SpanRow, dialect: str, extra: dict[str, str]) -> None:
    """Tool names, agent names and step boundaries the mapping table cannot express."""
    if dialect == "tool" and row.kind == sc.KIND_TOOL and not row.tool_name:
        row.tool_name = extra.get(sc.TRACELOOP_ENTITY_NAME, "")
    elif dialect == "task" and row.kind == sc.KIND_STEP and sc.TRACELOOP_ENTITY_PATH in extra:
        row.kind = sc.KIND_OTHER  # a task inside a task or tool is part of that step, not one more
    elif dialect == "AGENT" and row.kind == sc.KIND_RUN and not row.agent_name:
        row.agent_name = row.name


def _stream_latency(
    row: SpanRow, events: list[dict[str, Any]] | None, extra: dict[str, str], warn: Callable[[str], None]
) -> None:
    """TTFT and TPOT of an LLM span from openlit's attributes or from stream events.

    openlit records a call it did not stream with its whole duration as TTFT and 0 as TPOT:
    neither counts. Events: OpenInference's first-token event, traceloop's event per chunk;
    TTFT is the first one's time after the span start, TPOT the time from it to the last chunk
    (the span end when only the first is recorded) over the output tokens after the first.
    """
    if sc.GEN_AI_SERVER_TIME_TO_FIRST_TOKEN in extra and extra.get(sc.GEN_AI_REQUEST_STREAM) != "false":
        for column, key in (
            ("ttft_s", sc.GEN_AI_SERVER_TIME_TO_FIRST_TOKEN),
            ("tpot_s", sc.GEN_AI_SERVER_TIME_PER_OUTPUT_TOKEN),
        ):
            if getattr(row, column) is None:
                try:
                    setattr(row, column, bounds.seconds(extra.get(key)) or None)  # openlit's TPOT is 0 for one chunk
                except BadValue as bad:
                    warn(f"{key} {bad}; dropped")
    if not events or (row.ttft_s is not None and row.tpot_s is not None):
        return
    start, end = row.start_time_ns, row.end_time_ns
    times = [
        t for e in events if e.get("name") in STREAM_EVENTS and type(t := e.get("time_ns")) is int and start <= t <= end
    ]
    if not times:
        return
    first, last = min(times), max(times)
    if row.ttft_s is None:
        row.ttft_s = (first - start) / 1e9
    if row.tpot_s is None and row.output_tokens > 1:
        last = last if last > first else end  # OpenInference records the first chunk only
        if last > first:
            row.tpot_s = (last - first) / 1e9 / (row.output_tokens - 1)


# An engine span's own tokens and price, kept as attributes: its token and cost columns carry
# only what ``collector.ingest.engine_join`` adds to the client's count (cached tokens the client did
# not record, and the price difference they make), so the call's tokens count once.
ENGINE_FIGURES = ("input_tokens", "output_tokens", "cached_tokens", "cost_usd", "price_version")
ENGINE_PREFIX = "agentwatch.engine."


def set_engine_figures_aside(row: SpanRow) -> None:
    for name in ENGINE_FIGURES:
        value = getattr(row, name)
        if value:
            row.attributes[ENGINE_PREFIX + name] = value if isinstance(value, str) else repr(value)
    row.input_tokens = row.output_tokens = row.cached_tokens = 0
    row.cost_usd, row.price_version = 0.0, ""


def _kind(cols: dict[str, Any], name: str, parent: str) -> str:
    """run | step | llm | tool | retrieval | other, from the most specific signal present.

    Consumes the ``@`` signal entries of ``cols`` so the rest can build the row.
    """
    aw = cols.pop("@kind", None)
    op = cols.pop("@op", None)
    oi = cols.pop("@oi", None)
    tl = cols.pop("@tl", None)
    llm = cols.pop("@llm", None)
    cols.pop("@project", None)
    if aw in _KINDS:
        return aw
    if name == sc.VLLM_SPAN_NAME and "request_id" in cols:
        # The engine's view of a call, with or without the client's trace context: never a run,
        # never billed itself (collector.ingest.engine_join joins it to the client's LLM span).
        return sc.KIND_ENGINE
    kind = _OPERATION_KINDS.get(op) or _OPENINFERENCE_KINDS.get(oi) or _TRACELOOP_KINDS.get(tl)
    if kind is None:
        if llm is not None or "model" in cols:
            kind = sc.KIND_LLM
        elif "tool_name" in cols:
            kind = sc.KIND_TOOL
        else:
            return sc.KIND_OTHER
    if kind == sc.KIND_STEP and not parent:
        return sc.KIND_RUN  # a root chain/task is the run itself
    return kind


_DEFAULT = Normalizer()


def normalize_span(
    attributes: Mapping[str, Any],
    *,
    project: str = "default",
    name: str = "span",
    trace_id: str = "0" * 31 + "1",
    span_id: str = "0" * 15 + "1",
    parent_span_id: str = "",
    start_time_ns: int = 0,
    end_time_ns: int = 0,
    status_code: int = 0,
    status_message: str = "",
    resource: Resource | None = None,
    events: list[dict[str, Any]] | None = None,
    normalizer: Normalizer | None = None,
    warn: Warn | None = None,
) -> SpanRow:
    """Normalise one span given as an attribute dict (the unit-testable front door)."""
    return (normalizer or _DEFAULT).normalize(
        project,
        resource or Resource("", {}),
        trace_id,
        span_id,
        parent_span_id,
        name,
        start_time_ns,
        end_time_ns,
        status_code,
        status_message,
        attributes.items(),
        events,
        warn,
    )
