"""OTLP/HTTP failures as the specification asks ("Failures"): every error answer of
``POST /v1/traces`` is a ``google.rpc.Status`` in the request's encoding (protobuf or JSON),
whichever part of the collector refused it, with ``Retry-After`` on 429 and 503; the real OTLP
exporter receives it. A real collector (uvicorn on 127.0.0.1) over chDB."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import requests
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.collector.ingest_helpers import Running, agent_trace, otlp_request, serve, settings_for
from tests.support import local_http
from tests.support.ports import free_port

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
RATE = 10.0  # spans/s per key in `collector`: one request of 1000 spans puts its key in debt
BAD_BODY = {PROTOBUF: agent_trace(bytes(range(16))).SerializeToString()[:-7], JSON: b'{"resourceSpans": ['}
EMPTY = {PROTOBUF: b"", JSON: b"{}"}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    settings = settings_for(
        tmp_path_factory.mktemp("otlp-errors") / "data",
        max_body_bytes=100_000,
        rate_limit_spans_per_s=RATE,
        body_read_timeout_s=0.5,
    )
    with serve(settings) as running:
        yield running


def _post(running: Running, body: bytes, content_type: str, key: str | None) -> httpx.Response:
    headers = {"Content-Type": content_type} | ({"Authorization": f"Bearer {key}"} if key else {})
    return local_http.post(running.url + "/v1/traces", content=body, headers=headers, timeout=30)


def _bad_body(c: Running, ctype: str) -> httpx.Response:
    return _post(c, BAD_BODY[ctype], ctype, c.key("errors"))


def _no_key(c: Running, ctype: str) -> httpx.Response:
    return _post(c, EMPTY[ctype], ctype, None)


def _unknown_key(c: Running, ctype: str) -> httpx.Response:
    return _post(c, EMPTY[ctype], ctype, "aw_000000000000_" + "x" * 43)


def _read_scope(c: Running, ctype: str) -> httpx.Response:
    return _post(c, EMPTY[ctype], ctype, c.key("errors", ["read"]))


def _too_large(c: Running, ctype: str) -> httpx.Response:
    return _post(c, b" " * 100_001, ctype, c.key("errors"))


def _over_rate(c: Running, ctype: str) -> httpx.Response:
    key = c.key("errors")  # a key of its own: its own bucket
    burst = otlp_request(os.urandom(16), [{"span_id": os.urandom(8)} for _ in range(1000)]).SerializeToString()
    assert _post(c, burst, PROTOBUF, key).status_code == 200  # let in, and the key is 990 spans in debt
    return _post(c, EMPTY[ctype], ctype, key)


def _spool_full(c: Running, ctype: str) -> httpx.Response:
    key, spool = c.key("errors"), c.app.state.ingestor.spool
    limit, spool.max_bytes = spool.max_bytes, 0  # a spool that holds nothing more: the capacity check refuses
    try:
        return _post(c, EMPTY[ctype], ctype, key)
    finally:
        spool.max_bytes = limit


def _stalled_body(c: Running, ctype: str) -> httpx.Response:
    """Headers that promise 50 kB, 10 bytes of body, then nothing: the collector answers 408 and closes."""
    head = (
        f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {c.key('errors')}\r\n"
        f"Content-Type: {ctype}\r\nContent-Length: 50000\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", c.settings.port), timeout=30) as sock:
        sock.sendall(head.encode() + b"\n\x00" * 5)
        data = b""
        while chunk := sock.recv(65536):  # until the server closes the connection
            data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = top.decode().split("\r\n")
    headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines]
    return httpx.Response(int(status_line.split()[1]), headers=headers, content=body)


def _wrong_method(c: Running, ctype: str) -> httpx.Response:
    return local_http.get(c.url + "/v1/traces", headers={"Content-Type": ctype}, timeout=30)


Provoke = Callable[[Running, str], httpx.Response]
CASES: list[tuple[int, int, str | dict[str, str], Provoke]] = [  # HTTP status, google.rpc.Code, message, how
    (400, 3, {PROTOBUF: "not a valid OTLP protobuf", JSON: "body is not valid JSON"}, _bad_body),
    (401, 16, "missing API key", _no_key),
    (401, 16, "invalid or revoked API key", _unknown_key),
    (403, 7, "lacks the 'ingest' scope", _read_scope),
    (413, 8, "exceeds the limit of 100000 bytes", _too_large),
    (429, 8, "rate limit of 10 spans/s", _over_rate),
    (503, 14, "spool is full", _spool_full),
    (405, 12, "Method Not Allowed", _wrong_method),
    (408, 4, "request body timed out", _stalled_body),
]


def _status(response: httpx.Response, content_type: str) -> status_pb2.Status:
    """The body decoded as the specification's ``Status``, in the encoding it must have."""
    assert response.headers["content-type"] == content_type, response.text[:200]
    if content_type == PROTOBUF:
        return status_pb2.Status.FromString(response.content)
    body = response.json()
    assert sorted(body) == ["code", "details", "message"], body  # every field present, as the schema requires
    found = status_pb2.Status(code=body["code"], message=body["message"])
    for detail in body["details"]:
        assert detail.pop("@type") == "type.googleapis.com/google.rpc.BadRequest", detail
        found.details.add().Pack(error_details_pb2.BadRequest(field_violations=detail["fieldViolations"]))
    return found


@pytest.mark.parametrize("content_type", [PROTOBUF, JSON])
@pytest.mark.parametrize(("http_status", "code", "words", "provoke"), CASES, ids=[c[3].__name__ for c in CASES])
def test_every_refusal_is_a_status_in_the_request_encoding(
    collector: Running,
    content_type: str,
    http_status: int,
    code: int,
    words: str | dict[str, str],
    provoke: Provoke,
) -> None:
    words = words[content_type] if isinstance(words, dict) else words
    response = provoke(collector, content_type)
    assert response.status_code == http_status, response.text[:300]
    status = _status(response, content_type)
    assert (status.code, words in status.message) == (code, True), status.message
    if http_status in (429, 503):
        assert int(response.headers["Retry-After"]) >= 1
    if http_status == 400:  # the specification's SHOULD: a BadRequest describing the bad data
        bad = error_details_pb2.BadRequest()
        assert status.details[0].Unpack(bad) and bad.field_violations[0].description == status.message


@pytest.mark.parametrize("content_type", [PROTOBUF, JSON])
def test_a_key_that_cannot_be_verified_with_the_store_down_is_a_503_status(tmp_path: Path, content_type: str) -> None:
    """The key check around the route: with the store away an unknown key is neither let in nor
    dropped (401) but told to retry, and the answer names no address of the store."""
    secret_url = f"http://user:hunter2@127.0.0.1:{free_port()}/db"  # nothing listens there
    with serve(settings_for(tmp_path / "data", clickhouse_url=secret_url)) as running:
        response = _post(running, EMPTY[content_type], content_type, "aw_000000000000_" + "x" * 43)
    assert response.status_code == 503 and int(response.headers["Retry-After"]) >= 1
    status = _status(response, content_type)
    assert status.code == 14 and "cannot verify the API key now" in status.message, status.message
    assert "hunter2" not in status.message and "127.0.0.1" not in status.message


def test_an_unsupported_content_type_is_answered_in_json(collector: Running) -> None:
    response = _post(collector, b"<spans/>", "text/xml", collector.key("errors"))
    assert response.status_code == 415
    status = _status(response, JSON)
    assert status.code == 3 and "'text/xml' is not supported" in status.message


def test_the_openapi_status_requires_its_fields(collector: Running) -> None:
    schema = local_http.get(collector.url + "/openapi.json").json()
    assert schema["components"]["schemas"]["Status"]["required"] == ["code", "message", "details"]
    answers = schema["paths"]["/v1/traces"]["post"]["responses"]
    for status in ("400", "401", "403", "408", "413", "415", "429", "503"):
        assert answers[status]["content"][JSON]["schema"] == {"$ref": "#/components/schemas/Status"}, status


def test_the_otlp_exporter_gets_our_status_on_a_refused_key(
    collector: Running, caplog: pytest.LogCaptureFixture
) -> None:
    """opentelemetry-exporter-otlp-proto-http: a 401 is final (one request, no retry) and what it
    received is our ``Status``, saying why."""
    received: list[requests.Response] = []
    session = requests.Session()
    session.hooks["response"].append(lambda response, *args, **kwargs: received.append(response))
    exporter = OTLPSpanExporter(
        endpoint=collector.url + "/v1/traces",
        headers={"Authorization": "Bearer aw_000000000000_" + "x" * 43},
        session=session,
        timeout=10,
    )
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("refused") as span:
        pass
    with caplog.at_level(logging.ERROR, logger="opentelemetry.exporter"):
        assert exporter.export([span]) == SpanExportResult.FAILURE  # type: ignore[list-item]
    exporter.shutdown()
    assert [r.status_code for r in received] == [401]
    assert received[0].headers["content-type"] == PROTOBUF
    assert status_pb2.Status.FromString(received[0].content).message == "invalid or revoked API key"
    assert any("401" in record.getMessage() for record in caplog.records), caplog.text


_REFUSED_AGENT = """
import logging, sys, agentwatch
logging.basicConfig(level=logging.WARNING, format="%(message)s")
agentwatch.init(endpoint=sys.argv[1], api_key="aw_000000000000_" + "x" * 43, service_name="refused")
with agentwatch.run("refused"):
    pass
agentwatch.shutdown()
"""


def test_the_agentwatch_sdk_logs_our_reason_on_a_refused_key(collector: Running) -> None:
    """The SDK's own exporter reads the Status: an agent with a wrong key says why, in its log."""
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_AGENT, collector.url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "collector rejected spans: HTTP 401 Unauthorized: invalid or revoked API key" in done.stderr, done.stderr
