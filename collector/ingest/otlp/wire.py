"""A request whose whole-message parse failed, split at wire level so one bad span is rejected alone.

upb refuses a whole ``ExportTraceServiceRequest`` for one string that is not UTF-8 or one
attribute value nested deeper than its limit. Read here field by field (varints and
length-delimited fields, nothing more), the request is rebuilt from its parts: each
``ResourceSpans`` as its resource and ``ScopeSpans``, each span parsed on its own. A span that
does not parse stays in the request as an empty ``Span`` so the indices of the others do not
move, and its index and reason are returned; a resource that does not parse rejects its
spans. Framing that cannot be read (a truncated length, a varint past the end, an unknown wire
type) is a ``BadRequest``, as before.
"""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

from agentwatch_platform.collector.ingest.otlp.errors import BadRequest

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
# Field numbers (opentelemetry-proto trace/v1): request.resource_spans, resource_spans.resource,
# resource_spans.scope_spans, scope_spans.scope, scope_spans.spans.
_RESOURCE_SPANS, _RESOURCE, _SCOPE_SPANS, _SCOPE, _SPANS = 1, 1, 2, 1, 2


def split_request(payload: bytes, error: str) -> tuple[ExportTraceServiceRequest, dict[int, str]]:
    """The request rebuilt from the parts that parse, and {span index: why} for those that do not.

    ``error`` is the whole-message parse error, the message of the ``BadRequest`` raised when
    the framing itself is broken.
    """
    request = ExportTraceServiceRequest()
    unreadable: dict[int, str] = {}
    index = 0
    for number, value in _fields(memoryview(payload), error, (_RESOURCE_SPANS,)):
        if number == _RESOURCE_SPANS:
            index = _resource_spans(request.resource_spans.add(), value, index, unreadable, error)
    return request, unreadable


def _resource_spans(rs: ResourceSpans, data: memoryview, index: int, unreadable: dict[int, str], error: str) -> int:
    first, resource_error = index, ""
    for number, value in _fields(data, error, (_RESOURCE, _SCOPE_SPANS)):
        if number == _RESOURCE:
            resource_error = _parse(rs.resource, value)
        elif number == _SCOPE_SPANS:
            index = _scope_spans(rs.scope_spans.add(), value, index, unreadable, error)
    if resource_error:
        rs.ClearField("resource")
        for i in range(first, index):
            unreadable.setdefault(i, f"its resource cannot be read: {resource_error}")
    return index


def _scope_spans(ss: ScopeSpans, data: memoryview, index: int, unreadable: dict[int, str], error: str) -> int:
    for number, value in _fields(data, error, (_SCOPE, _SPANS)):
        if number == _SCOPE:
            if _parse(ss.scope, value):
                ss.ClearField("scope")  # the scope's name is not stored: the spans are kept without it
        elif number == _SPANS:
            span = ss.spans.add()
            if why := _parse(span, value):
                span.Clear()
                unreadable[index] = why
            index += 1
    return index


def _parse(message: Message, data: memoryview) -> str:
    """ "" when ``data`` parses into ``message``, else why not, in words a sender can act on."""
    try:
        message.ParseFromString(bytes(data))
    except RecursionError:
        return "attribute values are nested too deeply"
    except DecodeError as exc:
        text = str(exc)
        if "UTF-8" in text:
            return "a string field is not valid UTF-8"
        if "MaxDepth" in text:
            return "attribute values are nested too deeply (more than 100 levels)"
        return f"not a valid OTLP message: {text}"
    return ""


def _fields(data: memoryview, error: str, messages: tuple[int, ...]) -> Iterator[tuple[int, memoryview]]:
    """(field number, value) of each length-delimited field; other wire types are skipped, but
    one of the message fields numbered in ``messages`` with another wire type is malformed."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos, error)
        number, wire_type = key >> 3, key & 7
        if number == 0 or (number in messages and wire_type != _LEN):
            raise BadRequest(error)
        if wire_type == _VARINT:
            _, pos = _varint(data, pos, error)
        elif wire_type in (_I64, _I32):
            pos += 8 if wire_type == _I64 else 4
        elif wire_type == _LEN:
            size, pos = _varint(data, pos, error)
            if pos + size > end:
                raise BadRequest(error)
            yield number, data[pos : pos + size]
            pos += size
        else:
            raise BadRequest(error)
        if pos > end:
            raise BadRequest(error)


def _varint(data: memoryview, pos: int, error: str) -> tuple[int, int]:
    value, shift = 0, 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise BadRequest(error)
