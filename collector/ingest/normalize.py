"""Normalisation: one ``SpanRow`` from a span in any dialect real instrumentations send.

Dialects: the OpenTelemetry GenAI conventions (current names and the older
``gen_ai.system`` / ``gen_ai.usage.prompt_tokens``), OpenInference (Arize Phoenix),
OpenLLMetry (Traceloop), vLLM's ``llm_request`` server spans and agentwatch's own
extensions. Mapped attributes become columns; every other attribute is kept, as text,
in ``SpanRow.attributes``. Long values are truncated with a marker, captured content
is redacted, LLM spans are priced.

The dialect table, the key lists and the kind rules are data in ``collector.ingest.spec``,
shared with the native decoder; the rules that table cannot express live here only.

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
from agentwatch_platform.collector.ingest.spec import (
    ATTRIBUTES,
    CONTENT_PREFIXES,
    DIALECT_SIGNALS,
    KIND_RULES,
    PYTHON_RULE_COLUMNS,
    RUN_NAMED_BY_SPAN,
    STATUS_CODES,
    STREAM_EVENTS,
    TIMEOUT_MARKER,
    to_text,
)
from agentwatch_platform.collector.storage.model import SpanRow

log = logging.getLogger(__name__)

TRUNCATION_MARKER = "…[truncated {n} chars]"
# Defaults of the per-span bounds (``collector.settings``: AGENTWATCH_MAX_ATTRIBUTE_KEY_LENGTH, ...).
MAX_KEY_LENGTH = 256  # attribute names longer than this are cut (names, not values: no real one is near it)
MAX_ATTRIBUTES = 1024  # unmapped attributes kept per span, and attributes per resource
MAX_EVENTS = 1024  # events kept per span
MAX_EVENT_ATTRIBUTES = 128  # attributes kept per event (OpenTelemetry's SDK default)
MAX_RESOURCE_BYTES = 256 * 1024 * 1024  # resource attributes a request stores, once per span (beyond: 413)

_NAMED_BY_RULE = frozenset({RUN_NAMED_BY_SPAN, "task", "tool"})  # dialects whose names ``_names`` sets
_ENGINE_TIMINGS = frozenset(PYTHON_RULE_COLUMNS)
_INF = float("inf")


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
            value = to_text(value)
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
        spec_get = ATTRIBUTES.get
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
        dialect = _dialect(cols) if cols else None
        kind = KIND_RULES.classify(cols, name, parent_span_id) if cols else sc.KIND_OTHER
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
            STATUS_CODES[status_code] if 0 <= status_code < len(STATUS_CODES) else STATUS_CODES[0],
            status_message,
            attributes=extra,
            resource=resource.attributes,
            **cols,
        )
        if not row.service_version:
            row.service_version = resource.service_version
        if not _ENGINE_TIMINGS.isdisjoint(cols):
            self._engine(row, extra)
        if events:
            self._events(row, events, lambda why: _warn(warn, span_id, why))
        elif row.error_type and not row.is_timeout and TIMEOUT_MARKER in row.error_type.lower():
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
            if pair[0] in ATTRIBUTES:
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
            if key.startswith(CONTENT_PREFIXES):
                extra[key] = redact(value)

    def _events(self, row: SpanRow, events: list[dict[str, Any]], warn: Callable[[str], None]) -> None:
        row.events, row.error_type = self.events(events, row.error_type, warn)
        if not row.is_timeout and TIMEOUT_MARKER in row.error_type.lower():
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
                k: self.captured(v) if k.startswith(CONTENT_PREFIXES) else self.text(v) for k, v in attrs.items()
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
    elif dialect == RUN_NAMED_BY_SPAN and row.kind == sc.KIND_RUN and not row.agent_name:
        row.agent_name = row.name


def _dialect(cols: dict[str, Any]) -> str | None:
    """The span's dialect: the first of ``DIALECT_SIGNALS`` it carries (before ``classify`` pops them)."""
    for signal in DIALECT_SIGNALS:
        value = cols.get(signal)
        if value:
            return value  # type: ignore[no-any-return]
    return None


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
