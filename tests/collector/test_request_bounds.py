"""Bounded requests: a body that stalls mid-way, or request headers that do (sent a byte at a
time, or never finished: slowloris), get 408 and the connection closed; 50 such connections do
not delay a normal export; string fields of the feedback API are bounded. A real collector
(uvicorn on 127.0.0.1, the collector's own HTTP protocol) and raw sockets for the stalling clients."""

from __future__ import annotations

import http.client
import os
import select
import socket
import time
from collections.abc import Iterator

import pytest

from tests.collector.ingest_helpers import Running, agent_trace, kv, serve, settings_for
from tests.support import local_http

TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, str]]:
    settings = settings_for(
        tmp_path_factory.mktemp("bounds") / "data",
        body_read_timeout_s=TIMEOUT_S,
        header_read_timeout_s=TIMEOUT_S,
        rate_limit_spans_per_s=0.0,
        max_resource_bytes_per_request=100_000,
    )
    with serve(settings) as running:
        yield running, running.app.state.keyring.create("bounded", scopes="ingest,read").key


def _stall(running: Running, path: str, key: str) -> socket.socket:
    """Headers promising 100 kB, 10 bytes of body, then nothing."""
    sock = socket.create_connection(("127.0.0.1", running.settings.port), timeout=10)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/x-protobuf\r\nContent-Length: 100000\r\n\r\n"
    )
    sock.sendall(head.encode() + b"\n\x00" * 5)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.mark.parametrize("path", ["/v1/traces", "/api/runs/" + "0" * 32 + "/feedback"])
def test_a_stalled_body_gets_408_and_the_connection_is_closed(collector: tuple[Running, str], path: str) -> None:
    running, key = collector
    started = time.monotonic()
    sock = _stall(running, path, key)
    answer = _answer(sock)
    took = time.monotonic() - started
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"AGENTWATCH_BODY_READ_TIMEOUT_S" in answer
    assert TIMEOUT_S * 0.9 <= took < TIMEOUT_S + 3


def _export_beside(running: Running, key: str, stalled: list[socket.socket]) -> None:
    """A normal export is stored while ``stalled`` connections hang, each of them answered 408
    and closed afterwards: the export did not wait for their deadline (TIMEOUT_S)."""
    try:
        time.sleep(0.2)  # the stalled connections are open first: the export comes among them
        body = agent_trace(os.urandom(16)).SerializeToString()
        started = time.monotonic()
        response = local_http.post(
            running.url + "/v1/traces",
            content=body,
            timeout=10,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-protobuf"},
        )
        assert response.status_code == 200 and time.monotonic() - started < TIMEOUT_S
        answers = [_answer(sock) for sock in stalled]  # each freed: 408 and closed
        assert all(a.startswith(b"HTTP/1.1 408") for a in answers)
    finally:
        for sock in stalled:
            sock.close()


def test_fifty_stalled_connections_do_not_delay_a_normal_export(collector: tuple[Running, str]) -> None:
    running, key = collector
    _export_beside(running, key, [_stall(running, "/v1/traces", key) for _ in range(50)])


def test_feedback_label_is_bounded(collector: tuple[Running, str]) -> None:
    running, key = collector
    url = running.url + "/api/runs/" + "0" * 32 + "/feedback"
    headers = {"Authorization": f"Bearer {key}"}
    response = local_http.post(url, json={"score": 1.0, "label": "x" * (1024 * 1024)}, headers=headers, timeout=30)
    assert response.status_code == 422 and "label" in response.text
    assert local_http.post(url, json={"score": 1.0, "label": "x" * 256}, headers=headers, timeout=30).status_code in (
        201,
        404,
    )


@pytest.mark.parametrize("score", ["1e308", "-2e6", "NaN", "Infinity"])
def test_feedback_score_is_bounded(collector: tuple[Running, str], score: str) -> None:
    """A mean of scores must stay finite: 1e308 twice averaged to inf."""
    running, key = collector
    response = local_http.post(
        running.url + "/api/runs/" + "0" * 31 + "1/feedback",
        content=f'{{"score": {score}}}',
        timeout=30,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    assert response.status_code == 422 and "score" in response.text
    assert "1000000" in response.text or "finite number" in response.text, response.text


# --- request heads ------------------------------------------------------------------------------

HEAD = "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\nContent-Length: 10\r\n"


def _connect(running: Running) -> socket.socket:
    return socket.create_connection(("127.0.0.1", running.settings.port), timeout=10)


def _trickle(sock: socket.socket, data: bytes, every_s: float) -> bytes:
    """Sends ``data`` a byte at a time until the server answers or closes; returns its answer."""
    poller = select.poll()  # not select(): a worker that ran many tests may hold descriptors past 1024
    poller.register(sock, select.POLLIN)
    for byte in data:
        if poller.poll(every_s * 1000):
            break
        sock.sendall(bytes([byte]))
    return _answer(sock)


def test_headers_sent_a_byte_at_a_time_get_408_and_the_connection_is_closed(collector: tuple[Running, str]) -> None:
    running, _ = collector
    with _connect(running) as sock:
        answer = _trickle(sock, (HEAD * 20).encode(), every_s=0.1)  # 4 bytes/s: ~60 s for the whole head
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"AGENTWATCH_HEADER_READ_TIMEOUT_S" in answer


def test_an_idle_connection_is_closed_without_an_answer(collector: tuple[Running, str]) -> None:
    running, _ = collector
    with _connect(running) as sock:
        assert _answer(sock) == b""


def test_a_kept_alive_connection_gets_the_same_deadline_for_its_next_request(collector: tuple[Running, str]) -> None:
    running, _ = collector
    conn = http.client.HTTPConnection("127.0.0.1", running.settings.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        first = conn.getresponse()
        assert first.status == 200 and first.read()
        assert conn.sock is not None
        conn.sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        assert _answer(conn.sock).startswith(b"HTTP/1.1 408")
    finally:
        conn.close()


def test_fifty_stalled_heads_do_not_delay_a_normal_export(collector: tuple[Running, str]) -> None:
    running, key = collector
    stalled = [_connect(running) for _ in range(50)]
    for sock in stalled:
        sock.sendall(HEAD.encode())  # the head, without its end
    _export_beside(running, key, stalled)


def test_an_export_storing_too_much_resource_per_span_gets_413(collector: tuple[Running, str]) -> None:
    running, key = collector
    request = agent_trace(os.urandom(16), llm_calls=20)
    request.resource_spans[0].resource.attributes.append(kv("process.command_line", "x" * 10_000))  # x 21 spans: 210 kB
    response = local_http.post(
        running.url + "/v1/traces",
        content=request.SerializeToString(),
        timeout=30,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-protobuf"},
    )
    assert response.status_code == 413 and b"AGENTWATCH_MAX_RESOURCE_BYTES_PER_REQUEST" in response.content
