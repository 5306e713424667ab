"""A connection the collector breaks under a read is read again once on a new one; a write is
never sent twice. A real socket server on 127.0.0.1 resets the first connection as it gets its
request (what a keep-alive connection closed by the server as the client reuses it looks like)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from agentwatch_api.client import CollectorClient, CollectorUnavailable

BODY = b'{"status": "ok"}'


class ResettingServer:
    """Resets its first connection after reading a request; answers 200 on every later one."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            head = conn.recv(65536)
            self.requests.append(head.split(b"\r\n", 1)[0])
            if len(self.requests) == 1:  # a reset, not a close: SO_LINGER with a zero timeout
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
                    + BODY
                )
            conn.close()

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() a close alone leaves blocked
        self.sock.close()
        self._thread.join(10)


@pytest.fixture
def server() -> Iterator[ResettingServer]:
    s = ResettingServer()
    yield s
    s.close()


def test_a_read_whose_connection_is_reset_is_read_again_once(server: ResettingServer) -> None:
    with CollectorClient(server.url, "aw_000000000000_" + "x" * 43) as client:
        assert client._request("GET", "/api/health").json() == {"status": "ok"}
    assert server.requests == [b"GET /api/health HTTP/1.1"] * 2


def test_a_write_whose_connection_is_reset_is_not_sent_again(server: ResettingServer) -> None:
    with CollectorClient(server.url, "aw_000000000000_" + "x" * 43) as client:
        with pytest.raises(CollectorUnavailable, match="cannot reach the collector"):
            client._request("POST", "/api/alerts", json={})
    assert server.requests == [b"POST /api/alerts HTTP/1.1"]
