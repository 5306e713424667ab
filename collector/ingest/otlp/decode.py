"""Decoding of OTLP ``ExportTraceServiceRequest`` bodies into one spans table per request.

The result is an Arrow table of ``SPANS_SCHEMA`` (``collector.storage.columns``): what the
spool replay, the writer and the store work on. These decoders normalise each span to a
``SpanRow`` and convert the rows once at the end (``spans_table``).

Two encodings, one result: protobuf (parsed by upb) and the OTLP JSON mapping (ids as
hex strings, 64-bit integers as strings or numbers, enums as numbers or names, lowerCamelCase
or snake_case field names). With the native decoder built, both go through it: a JSON
document in the common forms is re-encoded as protobuf (``native.json_wire``) first. A body
that cannot be read as a request is a ``BadRequest``; a span that is wrong on its own (ids of
the wrong length, wrong types) is rejected and reported in ``partial_success`` while the rest
of the request is kept.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from agentwatch_platform.collector.ingest.bounds import MAX_TIME_NS
from agentwatch_platform.collector.ingest.normalize import MAX_RESOURCE_BYTES, Normalizer, Resource
from agentwatch_platform.collector.ingest.otlp import native
from agentwatch_platform.collector.ingest.otlp.errors import BadRequest, PayloadTooLarge
from agentwatch_platform.collector.ingest.otlp.native import NativeDecoder, NativeFallback, json_wire
from agentwatch_platform.collector.ingest.otlp.wire import split_request
from agentwatch_platform.collector.storage.columns import SPAN_FIELDS, empty_spans_table, spans_table
from agentwatch_platform.collector.storage.model import SpanRow

log = logging.getLogger(__name__)

PROTOBUF = "protobuf"
JSON = "json"
_MAX_MESSAGES = 3
_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)
_MAX_NS = MAX_TIME_NS  # the latest time the store keeps (collector.ingest.bounds: DateTime ends in 2106)
_SCALARS = frozenset({"string_value", "int_value", "double_value", "bool_value", "bytes_value"})
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_Window = tuple[int, int]  # (not before, not after): the span start times the store keeps, in ns


@dataclass(slots=True)
class Converted:
    """The spans of one request (a ``SPANS_SCHEMA`` table), what was rejected in it and what
    was dropped from the spans kept (fields out of bounds, ``collector.ingest.bounds``), and why."""

    table: pa.Table = field(default_factory=empty_spans_table)
    rejected: int = 0
    messages: list[str] = field(default_factory=list)
    warnings: int = 0  # fields dropped or corrected in spans that were kept
    _noted_rejections: int = field(default=0, repr=False)

    @property
    def spans(self) -> int:
        return self.table.num_rows

    def reject(self, where: str, why: str) -> None:
        """A span not kept; its message goes before any warning's (a lost span matters more)."""
        self.rejected += 1
        if self._noted_rejections < _MAX_MESSAGES:
            self.messages.insert(self._noted_rejections, f"{where}: {why}")
            self._noted_rejections += 1
            del self.messages[_MAX_MESSAGES:]

    def warn(self, where: str, why: str) -> None:
        """A field dropped or corrected, the span kept: OTLP's warning (``rejected_spans`` 0)."""
        self.warnings += 1
        if len(self.messages) < _MAX_MESSAGES:
            self.messages.append(f"{where}: {why}")

    @property
    def error_message(self) -> str:
        more = self.rejected + self.warnings - len(self.messages)
        return "; ".join(self.messages) + (f"; and {more} more" if more > 0 else "")


def convert(
    payload: bytes,
    fmt: str,
    project: str,
    normalizer: Normalizer,
    *,
    max_spans: int,
    not_before_ns: int = 0,
    not_after_ns: int = MAX_TIME_NS,
    native: bool = True,
    max_resource_bytes: int = MAX_RESOURCE_BYTES,
) -> Converted:
    """Decode and normalise one export request body (already decompressed).

    Every span stores its resource's attributes again: a request whose resources, so stored,
    come to more than ``max_resource_bytes`` is refused (``PayloadTooLarge``) before they are
    (a large resource over many small spans would otherwise multiply the body's size by the
    span count in memory).

    Spans that started before ``not_before_ns`` (older than the retention) or after
    ``not_after_ns`` (``collector.ingest.bounds.latest_start_ns``) are rejected: the store's TTL would
    drop them right after they were acknowledged. Both encodings go
    through the native decoder when it is built and ``native`` is set (JSON re-encoded as
    protobuf first); the Python path is the reference it falls back to, for a span or a whole
    request.
    """
    decoder = _native_decoder(normalizer) if native else None
    window = (not_before_ns, not_after_ns)
    if fmt == PROTOBUF:
        if decoder is not None:
            try:
                return _convert_native(decoder, payload, project, normalizer, max_spans, window, max_resource_bytes)
            except NativeFallback:
                pass  # something unusual in the request: the Python path decides
        request, unreadable = parse_protobuf_spans(payload)
        return convert_message(
            request,
            project,
            normalizer,
            max_spans=max_spans,
            not_before_ns=not_before_ns,
            not_after_ns=not_after_ns,
            unreadable=unreadable,
            max_resource_bytes=max_resource_bytes,
        )
    doc = parse_json(payload)
    if decoder is not None:
        try:
            wire, count = json_wire(doc)  # the same request as protobuf, for the same decoder
            if count > max_spans:
                raise _too_many(count, max_spans)
            return _convert_native(decoder, wire, project, normalizer, max_spans, window, max_resource_bytes)
        except NativeFallback:
            pass  # a form only the Python JSON path reads (or rejects with a precise message)
    return _convert_json(doc, project, normalizer, max_spans, window, _ResourceBudget(max_resource_bytes))


class _ResourceBudget:
    """The resource bytes a request stores, once per span, against its limit."""

    __slots__ = ("limit", "used", "spans")

    def __init__(self, limit: int, used: int = 0, spans: int = 0) -> None:
        self.limit, self.used, self.spans = limit, used, spans

    def spend(self, resource: Resource) -> None:
        self.used += resource.size
        self.spans += 1
        if self.used > self.limit:
            raise PayloadTooLarge(
                f"the request's resource attributes, stored with each of its spans, come to more than {self.limit} bytes "
                f"by span {self.spans} (AGENTWATCH_MAX_RESOURCE_BYTES_PER_REQUEST); send fewer spans per request "
                "or fewer, shorter resource attributes"
            )


_NATIVE: weakref.WeakKeyDictionary[Normalizer, NativeDecoder] = weakref.WeakKeyDictionary()


def _native_decoder(normalizer: Normalizer) -> NativeDecoder | None:
    if not native.AVAILABLE:
        return None
    decoder = _NATIVE.get(normalizer)
    if decoder is None:
        decoder = _NATIVE[normalizer] = NativeDecoder(normalizer)
    return decoder


def _convert_native(
    decoder: NativeDecoder,
    payload: bytes,
    project: str,
    nz: Normalizer,
    max_spans: int,
    window: _Window,
    max_resource_bytes: int,
) -> Converted:
    """The decoder's table, plus the spans it declined normalised by the Python path, in request order."""
    decoded = decoder.decode(payload, project, *window, max_resource_bytes=max_resource_bytes)
    if decoded.spans > max_spans:
        raise _too_many(decoded.spans, max_spans)
    out = Converted(table=decoded.table)
    if not decoded.declined:
        return out
    request, unreadable = parse_protobuf_spans(payload)
    for index in sorted(unreadable.keys() & set(decoded.declined)):
        out.reject(f"span {index}", unreadable[index])
    declined = set(decoded.declined) - unreadable.keys()
    budget = _ResourceBudget(max_resource_bytes, decoded.resource_bytes, decoded.table.num_rows)
    rows, positions = _normalize_message(out, request, project, nz, window, declined, budget)
    if rows:
        table = _spans_table(out, rows)
        out.table = pa.concat_tables([decoded.table, table])
        if table.num_rows == len(rows):  # none dropped as invalid text: restore the request's order
            sent_back = set(decoded.declined)  # read by the Python path, or unreadable and rejected
            taken = [i for i in range(decoded.spans) if i not in sent_back]
            out.table = out.table.take(np.argsort(np.array(taken + positions, dtype=np.int64), kind="stable"))
    return out


def drop_repeated_spans(converted: Converted) -> None:
    """Keep the first of the spans that share a (trace id, span id) within one request and
    reject the others by name in ``partial_success``: the store keeps one span per key, so a
    repeat would otherwise vanish unreported. Span ids repeat across traces (counter-based
    tracers), so the key is the pair; one hash of the span ids decides the usual case."""
    table = converted.table
    if table.num_rows < 2 or pc.count_distinct(table.column("span_id")).as_py() == table.num_rows:
        return
    keys = pc.binary_join_element_wise(table.column("trace_id"), table.column("span_id"), "/")
    codes = keys.combine_chunks().dictionary_encode().indices.to_numpy()
    _, first = np.unique(codes, return_index=True)
    if len(first) == table.num_rows:
        return
    keep = np.zeros(table.num_rows, dtype=bool)
    keep[first] = True
    for index in np.flatnonzero(~keep).tolist():
        converted.reject(
            f"span {index}",
            f"trace {table.column('trace_id')[index]} span {table.column('span_id')[index]} appears again "
            "in this request; the first is kept",
        )
    converted.table = table.filter(pa.array(keep))


def response_body(converted: Converted, fmt: str) -> bytes:
    """``ExportTraceServiceResponse``; ``partial_success`` is set only when spans were rejected
    or fields dropped (then with ``rejected_spans`` 0, which OTLP reads as a warning)."""
    if fmt == JSON:
        if not converted.messages:
            return b"{}"
        partial: dict[str, str] = {"rejectedSpans": str(converted.rejected)} if converted.rejected else {}
        partial["errorMessage"] = converted.error_message
        return json.dumps({"partialSuccess": partial}).encode()
    return response_message(converted).SerializeToString()


def response_message(converted: Converted) -> ExportTraceServiceResponse:
    response = ExportTraceServiceResponse()
    if converted.messages:
        response.partial_success.rejected_spans = converted.rejected
        response.partial_success.error_message = converted.error_message
    return response


def _spans_table(out: Converted, rows: list[SpanRow]) -> pa.Table:
    """The rows as one table; a span with text that is not valid Unicode (a lone surrogate from
    a JSON escape) cannot be stored, so it is rejected alone rather than sinking the request."""
    try:
        return spans_table(rows)
    except UnicodeEncodeError:
        kept = []
        for row in rows:
            if why := _not_unicode(row):
                out.reject(f"span {row.span_id}", why)
            else:
                kept.append(row)
        return spans_table(kept)


def _not_unicode(row: SpanRow) -> str:
    """Why the row's text cannot be encoded as UTF-8, or "" when it can."""
    for name in SPAN_FIELDS:
        value = getattr(row, name)
        texts = (*value, *value.values()) if isinstance(value, dict) else (value,)
        try:
            "".join(text for text in texts if isinstance(text, str)).encode()
        except UnicodeEncodeError as exc:
            return f"{name} is not valid Unicode: {exc}"
    return ""


def _too_many(count: int, max_spans: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"request has {count} spans, more than the limit of {max_spans} per request (AGENTWATCH_MAX_SPANS_PER_REQUEST); export smaller batches"
    )


# --- protobuf --------------------------------------------------------------------------------


def parse_protobuf(payload: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(payload)
    except (DecodeError, RecursionError) as exc:
        raise BadRequest(f"body is not a valid OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    return request


def parse_protobuf_spans(payload: bytes) -> tuple[ExportTraceServiceRequest, dict[int, str]]:
    """The request, and {span index: why} for the spans that cannot be read on their own.

    When the whole message does not parse (a string that is not UTF-8, attribute values nested
    too deeply), ``wire.split_request`` parses it span by span so only the bad spans are
    rejected; framing that cannot be read is still a ``BadRequest``.
    """
    try:
        return parse_protobuf(payload), {}
    except BadRequest as exc:
        return split_request(payload, exc.message)


def convert_message(
    request: ExportTraceServiceRequest,
    project: str,
    nz: Normalizer,
    *,
    max_spans: int,
    not_before_ns: int = 0,
    not_after_ns: int = MAX_TIME_NS,
    unreadable: dict[int, str] | None = None,
    max_resource_bytes: int = MAX_RESOURCE_BYTES,
) -> Converted:
    """Normalise a parsed request; the spans at the indices in ``unreadable`` (left empty by
    ``parse_protobuf_spans``) are rejected with their reason."""
    count = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    if count > max_spans:
        raise _too_many(count, max_spans)
    out = Converted()
    for index, why in sorted((unreadable or {}).items()):
        out.reject(f"span {index}", why)
    only = set(range(count)) - unreadable.keys() if unreadable else None
    rows, _ = _normalize_message(
        out, request, project, nz, (not_before_ns, not_after_ns), only, _ResourceBudget(max_resource_bytes)
    )
    out.table = _spans_table(out, rows)
    return out


def _normalize_message(
    out: Converted,
    request: ExportTraceServiceRequest,
    project: str,
    nz: Normalizer,
    window: _Window,
    only: set[int] | None,
    budget: _ResourceBudget,
) -> tuple[list[SpanRow], list[int]]:
    """Rows of the spans at the indices in ``only`` (all when None), and their indices; rejects go to ``out``."""
    rows: list[SpanRow] = []
    positions: list[int] = []
    normalize = nz.normalize
    index = 0
    for rs in request.resource_spans:
        resource = None
        for ss in rs.scope_spans:
            for span in ss.spans:
                index += 1
                if only is not None and index - 1 not in only:
                    continue
                if resource is None:
                    resource = nz.resource(
                        {kv.key: _any_pb(kv.value) for kv in rs.resource.attributes}, _resource_warning(out)
                    )
                tid, sid, pid = span.trace_id, span.span_id, span.parent_span_id
                start, end = span.start_time_unix_nano, span.end_time_unix_nano
                if not _valid(tid, sid, pid, start, end, window):  # one cheap test for the common case
                    out.reject(f"span {index - 1}", _bad_ids(tid, sid, pid) or _bad_times(start, end, window))
                    continue
                budget.spend(resource)  # before the row exists: a refused request builds nothing more
                events = [_event_pb(e) for e in span.events] if span.events else None
                status = span.status
                try:
                    rows.append(
                        normalize(
                            project,
                            resource,
                            tid.hex(),
                            sid.hex(),
                            pid.hex(),
                            span.name,
                            start,
                            end,
                            status.code,
                            status.message,
                            _pairs_pb(span.attributes),
                            events,
                            out.warn,
                        )
                    )
                except Exception as exc:  # one bad span never sinks the request
                    log.exception("span %d could not be normalised", index - 1)
                    out.reject(f"span {index - 1}", f"could not be normalised: {exc}")
                    continue
                positions.append(index - 1)
    return rows, positions


def _valid(tid: bytes, sid: bytes, pid: bytes, start: int, end: int, window: _Window) -> bool:
    return (
        len(tid) == 16
        and len(sid) == 8
        and len(pid) in (0, 8)
        and tid != _ZERO_TRACE
        and sid != _ZERO_SPAN
        and window[0] <= start <= window[1]
        and start <= _MAX_NS
        and 0 <= end <= _MAX_NS
    )


def _bad_ids(tid: bytes, sid: bytes, pid: bytes) -> str:
    if len(tid) != 16 or tid == _ZERO_TRACE:
        return f"trace_id must be 16 bytes, not all zero (got {len(tid)} bytes)"
    if len(sid) != 8 or sid == _ZERO_SPAN:
        return f"span_id must be 8 bytes, not all zero (got {len(sid)} bytes)"
    if pid and len(pid) != 8:
        return f"parent_span_id must be empty or 8 bytes (got {len(pid)} bytes)"
    return ""


def _bad_times(start: int, end: int, window: _Window) -> str:
    """Times the store cannot keep would be lost after the 2xx (a failed insert, a TTL that
    drops them at once): refuse them now. "" when the times are kept."""
    if not (0 <= start <= _MAX_NS and 0 <= end <= _MAX_NS):
        return (
            f"start and end times must be between 0 and {_MAX_NS} ns since the epoch (2106-02-07T06:28:15Z, "
            f"where the store's DateTime ends; got {start}, {end})"
        )
    if start < window[0]:
        return f"span started before the retention window (start {start} ns < {window[0]} ns, AGENTWATCH_RETENTION_DAYS); it would be dropped, not stored"
    if start > window[1]:
        return (
            f"span starts too late for the store to keep (start {start} ns > {window[1]} ns: with AGENTWATCH_RETENTION_DAYS "
            "its expiry would pass 2106-02-07T06:28:15Z, where the store's DateTime ends); it would be dropped, not stored"
        )
    return ""


def _pairs_pb(attributes: Any) -> list[tuple[str, Any]]:
    """(key, value) pairs of a repeated ``KeyValue``; strings, the common case, take one access."""
    pairs: list[tuple[str, Any]] = []
    append = pairs.append
    for kv in attributes:
        value = kv.value
        text = value.string_value
        if text:
            append((kv.key, text))
            continue
        which = value.WhichOneof("value")
        append((kv.key, getattr(value, which) if which in _SCALARS else _any_pb(value)))
    return pairs


def _any_pb(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_any_pb(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _any_pb(kv.value) for kv in value.kvlist_value.values}
    return None if which is None else getattr(value, which)


def _event_pb(event: Any) -> dict[str, Any]:
    return {
        "name": event.name,
        "time_ns": event.time_unix_nano,
        "attributes": {kv.key: _any_pb(kv.value) for kv in event.attributes},
    }


def _resource_warning(out: Converted) -> Callable[[str], None]:
    return lambda why: out.warn("resource", why)


# --- JSON ------------------------------------------------------------------------------------


def parse_json(payload: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(payload)
    except UnicodeDecodeError as exc:
        raise BadRequest(f"JSON body is not valid UTF-8: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadRequest("JSON body must be an object with 'resourceSpans'")
    return doc


def _convert_json(
    doc: dict[str, Any], project: str, nz: Normalizer, max_spans: int, window: _Window, budget: _ResourceBudget
) -> Converted:
    resource_spans = _jlist(doc, "resourceSpans", "resource_spans", "request")
    scopes = [
        (rs, _jlist(_jobj(rs, "resourceSpans[]"), "scopeSpans", "scope_spans", "resourceSpans[]"))
        for rs in resource_spans
    ]
    spans = [
        (rs, [_jlist(_jobj(ss, "scopeSpans[]"), "spans", "spans", "scopeSpans[]") for ss in sss]) for rs, sss in scopes
    ]
    count = sum(len(s) for _, lists in spans for s in lists)
    if count > max_spans:
        raise _too_many(count, max_spans)
    out = Converted()
    rows: list[SpanRow] = []
    index = 0
    for rs, lists in spans:
        try:
            res = _jget(rs, "resource", "resource") or {}
            resource = nz.resource(_jattrs(res), _resource_warning(out))
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError) as exc:
            raise BadRequest(f"resourceSpans[].resource is malformed: {exc}") from None
        for span_list in lists:
            for span in span_list:
                index += 1
                if (row := _json_span(out, nz, project, resource, span, index - 1, window)) is not None:
                    budget.spend(resource)
                    rows.append(row)
    out.table = _spans_table(out, rows)
    return out


def _json_span(
    out: Converted, nz: Normalizer, project: str, resource: Resource, span: Any, index: int, window: _Window
) -> SpanRow | None:
    """The normalised span, or None when it is rejected (recorded in ``out``)."""
    try:
        if not isinstance(span, dict):
            raise TypeError("span must be an object")
        tid = _hex_id(_jget(span, "traceId", "trace_id"), 16, "traceId")
        sid = _hex_id(_jget(span, "spanId", "span_id"), 8, "spanId")
        parent = _jget(span, "parentSpanId", "parent_span_id") or ""
        pid = _hex_id(parent, 8, "parentSpanId") if parent else ""
        status = _jget(span, "status", "status") or {}
        code = status.get("code", 0)
        code = _STATUS_NAMES[code] if isinstance(code, str) else int(code)
        events = [_json_event(e) for e in _jget(span, "events", "events") or ()] or None
        start = int(_jget(span, "startTimeUnixNano", "start_time_unix_nano") or 0)
        end = int(_jget(span, "endTimeUnixNano", "end_time_unix_nano") or 0)
        if why := _bad_times(start, end, window):
            raise ValueError(why)
        return nz.normalize(
            project,
            resource,
            tid,
            sid,
            pid,
            _jstr(_jget(span, "name", "name")),
            start,
            end,
            code,
            _jstr(status.get("message")),
            _jpairs(span),
            events,
            out.warn,
        )
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError) as exc:
        out.reject(f"span {index}", str(exc) or type(exc).__name__)
        return None
    except Exception as exc:  # one bad span never sinks the request
        log.exception("span %d could not be normalised", index)
        out.reject(f"span {index}", f"could not be normalised: {exc}")
        return None


def _hex_id(value: Any, size: int, name: str) -> str:
    if not isinstance(value, str) or len(value) != 2 * size:
        got = f"{len(value)} characters" if isinstance(value, str) else type(value).__name__
        raise ValueError(f"{name} must be {2 * size} hex characters (got {got})")
    try:
        raw = binascii.unhexlify(value)
    except (binascii.Error, ValueError):
        raise ValueError(f"{name} is not hex: {value[:40]!r}") from None
    if raw == bytes(size):
        raise ValueError(f"{name} must not be all zero")
    return value.lower()


def _json_event(event: Any) -> dict[str, Any]:
    return {
        "name": _jstr(event.get("name")),
        "time_ns": int(_jget(event, "timeUnixNano", "time_unix_nano") or 0),
        "attributes": _jattrs(event),
    }


def _jattrs(obj: dict[str, Any]) -> dict[str, Any]:
    return {_jstr(kv.get("key")): _any_json(kv.get("value")) for kv in obj.get("attributes") or ()}


def _jpairs(obj: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(_jstr(kv.get("key")), _any_json(kv.get("value"))) for kv in obj.get("attributes") or ()]


def _any_json(value: Any) -> Any:
    """An OTLP JSON ``AnyValue`` as a Python value."""
    if not value:
        return None
    for key, item in value.items():
        if key in ("stringValue", "string_value"):
            return _jstr(item)
        if key in ("intValue", "int_value"):
            return int(item)
        if key in ("doubleValue", "double_value"):
            return float(item)
        if key in ("boolValue", "bool_value"):
            return bool(item)
        if key in ("arrayValue", "array_value"):
            return [_any_json(v) for v in (item or {}).get("values") or ()]
        if key in ("kvlistValue", "kvlist_value"):
            return {_jstr(kv.get("key")): _any_json(kv.get("value")) for kv in (item or {}).get("values") or ()}
        if key in ("bytesValue", "bytes_value"):
            return base64.b64decode(item, validate=True)
    raise ValueError(f"unknown AnyValue {sorted(value)!r}")


def _jget(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _jobj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"{where} must be an object, not {type(value).__name__}")
    return value


def _jlist(obj: dict[str, Any], camel: str, snake: str, where: str) -> list[Any]:
    value = _jget(obj, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRequest(f"{where}.{camel} must be a list, not {type(value).__name__}")
    return value


def _jstr(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value
