"""The OTLP/HTTP failure body: a ``google.rpc.Status`` in the request's encoding, for every error.

The specification (opentelemetry-proto ``docs/specification.md``, "Failures"): the body of
every 4xx and 5xx answer to an export is a ``Status`` whose ``message`` is for the developer,
and the answer's ``Content-Type`` is the request's (protobuf or JSON). Clients act on the HTTP
status, not on ``Status.code``; ``code`` is still the gRPC code that HTTP status stands for, so a
log that records it reads right. A 400 carries a ``google.rpc.BadRequest`` in ``details``, as
the specification recommends. A request whose content type is neither (the 415) is answered
in JSON.

``collector.ingest.otlp.http`` answers its own refusals with ``error_response``; the errors
raised around the route (the key check, the capacity check, the framework's 404/405/422/500)
reach it through ``collector.api.errors``, which asks ``is_otlp`` which body a path gets.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from fastapi import Response
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from agentwatch_platform.collector.ingest.otlp.decode import JSON, PROTOBUF

TRACES_PATH = "/v1/traces"
MEDIA = {"application/x-protobuf": PROTOBUF, "application/protobuf": PROTOBUF, "application/json": JSON}
CONTENT_TYPES = {PROTOBUF: "application/x-protobuf", JSON: "application/json"}
# HTTP status -> google.rpc.Code (google/rpc/code.proto's mapping; 413 is a resource exhausted)
GRPC_CODES = {
    400: 3,  # INVALID_ARGUMENT
    401: 16,  # UNAUTHENTICATED
    403: 7,  # PERMISSION_DENIED
    404: 5,  # NOT_FOUND
    405: 12,  # UNIMPLEMENTED
    408: 4,  # DEADLINE_EXCEEDED
    413: 8,  # RESOURCE_EXHAUSTED
    415: 3,  # INVALID_ARGUMENT
    422: 3,  # INVALID_ARGUMENT
    429: 8,  # RESOURCE_EXHAUSTED
    500: 13,  # INTERNAL
    503: 14,  # UNAVAILABLE
}
_UNKNOWN = 2


def is_otlp(path: str) -> bool:
    """Whether errors on ``path`` are answered as OTLP ``Status`` (the export endpoint)."""
    return path == TRACES_PATH


def media_format(content_type: str) -> str | None:
    """PROTOBUF or JSON for a request's ``Content-Type`` (parameters ignored), None for another."""
    return MEDIA.get(content_type.split(";")[0].strip().lower())


def status(http_status: int, message: str) -> status_pb2.Status:
    """The ``Status`` of an HTTP error answer."""
    answer = status_pb2.Status(code=GRPC_CODES.get(http_status, _UNKNOWN), message=message)
    if http_status == 400:
        violation = error_details_pb2.BadRequest.FieldViolation(field="body", description=message)
        answer.details.add().Pack(error_details_pb2.BadRequest(field_violations=[violation]))
    return answer


def encode(answer: status_pb2.Status, fmt: str) -> bytes:
    """Protobuf bytes, or the proto3 JSON mapping with every field present (``details`` too)."""
    if fmt == PROTOBUF:
        return answer.SerializeToString()
    details = [json_format.MessageToDict(detail) for detail in answer.details]
    return json.dumps({"code": answer.code, "message": answer.message, "details": details}).encode()


def error_response(
    http_status: int,
    message: str,
    content_type: str,
    *,
    retry_after: float | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """The answer to a failed export: ``Status`` in the request's encoding (JSON for another),
    ``Retry-After`` in whole seconds when the client should come back."""
    fmt = media_format(content_type) or JSON
    out = dict(headers or {})
    if retry_after:
        out["Retry-After"] = str(max(1, math.ceil(retry_after)))
    body = encode(status(http_status, message), fmt)
    return Response(body, status_code=http_status, media_type=CONTENT_TYPES[fmt], headers=out)
