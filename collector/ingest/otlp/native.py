"""The native OTLP protobuf decoder (``_native.c``) wired to a ``Normalizer``.

The C decoder reads the wire format and applies the decoder spec (``collector.ingest.spec``: the
attribute table, the kind rules) into Arrow buffers, one per ``SpanRow`` field. It gets one
argument, a ``DecoderSpec`` built here once per normaliser (``decoder_spec``): the spec's tables
in slot form, with the normaliser's own converters, redaction, pricing and event handling as
callables; it reads it by attribute. This module wraps the buffers as the spans table
(``SPANS_SCHEMA``) without copying. Spans it declines (links, engine timings, invalid ids or
times, a converter that raises) come back by index for the Python path; a request whose
structure it does not vouch for raises ``NativeFallback`` and goes the Python way whole.
The Python path is the reference: tests/collector/test_native_decode.py checks both agree.

``json_wire`` (``_json_wire.c``) re-encodes a parsed OTLP JSON document as protobuf, so JSON
bodies take the same decoder; a document in a form it does not vouch for raises
``NativeFallback`` and is read by the Python JSON path.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from agentwatch import semconv as sc

from agentwatch_platform.collector.errors import CollectorError
from agentwatch_platform.collector.ingest import bounds, normalize, spec
from agentwatch_platform.collector.ingest.normalize import Normalizer, Resource
from agentwatch_platform.collector.ingest.spec import DecoderSpec
from agentwatch_platform.collector.storage.columns import _MAP, _STR, SPAN_FIELDS, SPANS_SCHEMA
from agentwatch_platform.collector.storage.model import SpanRow

SPEC_CONTRACT = 3  # the DecoderSpec contract this module builds: _native.SPEC_ABI must say the same
try:  # SPEC_ABI: a module built from an older _native.c (another DecoderSpec contract) is not used
    from agentwatch_platform.collector.ingest.otlp import _native
    from agentwatch_platform.collector.ingest.otlp._native import SPEC_ABI, Decoder, NativeFallback, json_wire
except ImportError as exc:  # not built (e.g. a source checkout without a compiler): the Python path does it all
    Decoder = None  # type: ignore[assignment,misc]
    NativeFallback = RuntimeError  # type: ignore[assignment,misc]
    json_wire = None  # type: ignore[assignment]
    NOT_BUILT = f"{exc} (built from an older _native.c: rebuild it)" if "SPEC_ABI" in str(exc) else str(exc)
else:
    NOT_BUILT = (
        ""
        if SPEC_ABI == SPEC_CONTRACT
        else f"built for DecoderSpec contract {SPEC_ABI}, not {SPEC_CONTRACT}: rebuild it"
    )
    if NOT_BUILT:
        Decoder = None  # type: ignore[assignment,misc]
        json_wire = None  # type: ignore[assignment]

AVAILABLE = Decoder is not None


def _column_type(field: pa.Field) -> str:
    """The C decoder's name of a SPANS_SCHEMA column's type (its ``COLUMN_TYPES``)."""
    name, kind = field.name, field.type
    if pa.types.is_map(kind):
        return "map"
    if pa.types.is_string(kind):
        return "string"
    if pa.types.is_timestamp(kind):
        return "timestamp"
    if name.endswith("_tokens"):
        return "tokens"  # UInt32, clamped as columns._tokens_column does
    return {pa.float64(): "float64", pa.float32(): "float32", pa.bool_(): "bool", pa.int32(): "int32"}[kind]


@dataclass(slots=True)
class Decoded:
    """The natively decoded part of a request, and which spans the Python path must take."""

    table: pa.Table
    declined: list[int]
    spans: int  # all spans in the request, declined included
    resource_bytes: int = 0  # the resource attributes the table stores, once per span (UTF-8)


def _defaults() -> tuple[Any, ...]:
    out = []
    for f in dataclasses.fields(SpanRow):
        out.append(None if f.default is dataclasses.MISSING else f.default)
    return tuple(out)


class _PythonRule(CollectorError):
    """Raised by a hook to decline a span whose dialect rule lives only in ``collector.ingest.normalize``."""


def _python_rule(value: Any) -> None:
    raise _PythonRule


def _unless(values: frozenset[str], convert: Any) -> Any:
    """``convert``, but a value in ``values`` declines the span (spec.PYTHON_RULE_SIGNALS)."""

    def checked(value: Any) -> Any:
        if type(value) is str and value in values:
            raise _PythonRule
        return convert(value)

    return checked


def _slots() -> dict[str, int]:
    """Slot of each SpanRow field, then of each kind signal."""
    slot_of = {name: i for i, name in enumerate(SPAN_FIELDS)}
    slot_of.update({name: len(SPAN_FIELDS) + i for i, name in enumerate(spec.SIGNALS)})
    return slot_of


def _attributes(slot_of: dict[str, int]) -> dict[str, tuple[int, int, int, Any]]:
    """``spec.ATTRIBUTES`` in slot form: key -> (slot, rank, converter code, converter)."""
    table = {}
    codes = _native.CONVERTERS
    for key, (column, rank, convert) in spec.ATTRIBUTES.items():
        if key in spec.PYTHON_RULE_SIGNALS:
            convert = _unless(spec.PYTHON_RULE_SIGNALS[key], convert)
        if convert is None:
            conv = codes["captured"]
        elif convert is spec.nstr:
            conv = codes["nstr"]
        else:
            conv = codes["call"]
        table[key] = (slot_of[column], rank, conv, convert)
    for key in spec.PYTHON_RULE_KEYS:  # never stored by C: its converter always declines
        table[key] = (slot_of["name"], -1, codes["call"], _python_rule)
    return table


def _events_hook(nz: Normalizer) -> Any:
    """The normaliser's event handling, but stream events (TTFT, TPOT) and an event beyond the
    bounds (too many attributes, too long a name: the Python path cuts and warns) decline the
    span. The decoder declines a span with too many events itself."""
    stream_events, events_fn = spec.STREAM_EVENTS, nz.events
    max_attributes, max_key_len = nz.max_event_attributes, nz.max_key_len

    def events(events: list[dict[str, Any]], error_type: str) -> tuple[str, str]:
        for event in events:
            if event.get("name") in stream_events:
                raise _PythonRule
            attrs = event["attributes"]
            if len(attrs) > max_attributes or any(len(key) > max_key_len for key in attrs):
                raise _PythonRule
        return events_fn(events, error_type)

    return events


class NativeDecoder:
    """One per ``Normalizer``: the same limits, redaction and prices as its Python path."""

    def __init__(self, normalizer: Normalizer) -> None:
        if Decoder is None:
            raise RuntimeError("agentwatch_platform.collector.ingest.otlp._native is not built")
        nz = normalizer

        def resource(attrs: dict[str, Any]) -> Resource:
            if len(attrs) > nz.max_attributes or any(len(key) > nz.max_key_len for key in attrs):
                raise NativeFallback("a resource beyond the bounds: the Python path cuts it, with a warning")
            return nz.resource(attrs)

        self.resource = resource
        self._decoder = Decoder(decoder_spec(nz, resource))

    def decode(
        self,
        payload: bytes,
        project: str,
        not_before_ns: int = 0,
        not_after_ns: int = bounds.MAX_TIME_NS,
        *,
        max_resource_bytes: int = normalize.MAX_RESOURCE_BYTES,
    ) -> Decoded:
        """Spans that start outside [``not_before_ns``, ``not_after_ns``] are declined (the Python
        path rejects them). Raises ``NativeFallback`` when the whole request should take the Python
        path, also when the resource attributes it stores pass ``max_resource_bytes`` (the Python
        path refuses such a request with its message)."""
        window = (max(0, not_before_ns), min(max(0, not_after_ns), bounds.MAX_TIME_NS))
        columns, attr_keys, attr_values, res_keys, res_values, declined, spans = self._decoder.decode(
            payload, project, *window, max(0, max_resource_bytes)
        )
        table = _table(columns, attr_keys, attr_values, res_keys, res_values)
        return Decoded(table, declined, spans, len(res_keys[4]) + len(res_values[4]))


def decoder_spec(nz: Normalizer, resource: Any) -> DecoderSpec:
    """The one argument of ``_native.Decoder``: ``collector.ingest.spec`` in the C decoder's slot
    form, with ``nz``'s callables and bounds (``resource``: its resource hook, bounds checked)."""
    slot_of, rules = _slots(), spec.KIND_RULES
    return DecoderSpec(
        attributes=_attributes(slot_of),
        defaults=_defaults(),
        column_types=tuple(_native.COLUMN_TYPES[_column_type(f)] for f in SPANS_SCHEMA),
        named=tuple(SPAN_FIELDS.index(name) for name in _native.NAMED_FIELDS),
        content_prefixes=spec.CONTENT_PREFIXES,
        text=nz.text,
        captured=nz.captured,
        redact=nz.redact,
        price=nz.price if nz.pricer is not None else None,
        resource=resource,
        events=_events_hook(nz),
        signal_count=len(spec.SIGNALS),
        kinds=rules.declared,
        kind_declared_slot=slot_of[rules.declared_signal],
        kind_signals=tuple((slot_of[signal], dict(table)) for signal, table in rules.signals),
        kind_engine_name=rules.engine_name,
        kind_engine_slots=tuple(slot_of[column] for column in rules.engine_when),
        kind_llm_slots=tuple(slot_of[column] for column in (rules.llm_signal, *rules.llm_when)),
        kind_tool_slots=tuple(slot_of[column] for column in rules.tool_when),
        kind_names=rules.names,
        dialect_slots=tuple(slot_of[signal] for signal in spec.DIALECT_SIGNALS),
        run_named_by_span=spec.RUN_NAMED_BY_SPAN,
        decline_slots=tuple(slot_of[column] for column in spec.PYTHON_RULE_COLUMNS),
        status_names=spec.STATUS_CODES,
        timeout_marker=spec.TIMEOUT_MARKER,
        max_time_ns=bounds.MAX_TIME_NS,
        max_len=nz.max_len,
        max_key_len=nz.max_key_len,
        max_attributes=nz.max_attributes,
        max_events=nz.max_events,
    )


def _array(kind: pa.DataType, column: tuple) -> pa.Array:
    n, nulls, validity, offsets, data = column
    buffers = [None if validity is None else pa.py_buffer(validity)]
    if offsets is not None:
        buffers.append(pa.py_buffer(offsets))
    buffers.append(pa.py_buffer(data))
    return pa.Array.from_buffers(kind, n, buffers, null_count=nulls)


def _map(column: tuple, keys: tuple, values: tuple) -> pa.Array:
    n, _, _, offsets, _ = column
    return pa.MapArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(offsets)]),
        _array(_STR, keys),
        _array(_STR, values),
        type=_MAP,
    )


# Resolved once: a pa.Field's name and type are new Python objects at every access.
_PLAIN = [(i, f.type) for i, f in enumerate(SPANS_SCHEMA) if not pa.types.is_map(f.type)]
_ATTRIBUTES, _RESOURCE = SPANS_SCHEMA.get_field_index("attributes"), SPANS_SCHEMA.get_field_index("resource")
_VERSION = SPANS_SCHEMA.get_field_index("service_version")
_VERSION_KEY = sc.SERVICE_VERSION.encode()


def _table(columns: list[tuple], attr_keys: tuple, attr_values: tuple, res_keys: tuple, res_values: tuple) -> pa.Table:
    arrays: list[pa.Array | None] = [None] * len(columns)
    for i, kind in _PLAIN:
        arrays[i] = _array(kind, columns[i])
    arrays[_ATTRIBUTES] = _map(columns[_ATTRIBUTES], attr_keys, attr_values)
    arrays[_RESOURCE] = _map(columns[_RESOURCE], res_keys, res_values)
    if _VERSION_KEY in res_keys[4]:
        arrays[_VERSION] = _version(arrays[_VERSION], arrays[_RESOURCE])
    return pa.Table.from_arrays(arrays, schema=SPANS_SCHEMA)


def _version(own: pa.Array, resource: pa.Array) -> pa.Array:
    """A span's version: its own ``service.version`` (the C decoder maps it like any attribute), else
    its resource's, as ``Normalizer.normalize`` picks it (the decoder hands resources to Python only
    once each, so the fallback is taken here, over the column)."""
    inherited = pc.fill_null(pc.map_lookup(resource, _VERSION_KEY.decode(), "first"), "")
    return pc.if_else(pc.equal(own, ""), inherited, own)
