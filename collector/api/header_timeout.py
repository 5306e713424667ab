"""Request headers that stop arriving: 408 and the connection closed (slowloris).

uvicorn bounds how long a kept-alive connection may sit idle after a response, but not how
long a request's line and headers may take: its keep-alive timer is cancelled by any byte
received, and there is none at all on a new connection. A client that opens a connection and
sends its headers a byte at a time, or never finishes them, holds the connection, its buffer
and a file descriptor for as long as it likes; enough of them and no one else can connect.

``header_timeout_protocol(timeout_s)`` is uvicorn's h11 protocol with one more deadline: it
starts when a connection opens and again when a response completes, and it stops when a whole
request head (line and headers) has arrived. When it passes first, a client that sent part of
a head gets ``408 Request Timeout`` and the connection is closed; an idle connection is just
closed (a client may have opened it ahead of need, as browsers do). The body has its own
deadline (``collector.api.body_timeout``). Other connections never wait on it: each is its own
protocol instance on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

SETTING = "AGENTWATCH_HEADER_READ_TIMEOUT_S"


def response_408(timeout_s: float) -> bytes:
    body = json.dumps(
        {"detail": f"request headers timed out: no complete request head within {timeout_s:g} s ({SETTING})"}
    ).encode()
    head = (
        f"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head; ``header_timeout_s`` <= 0 disables it."""

    header_timeout_s = 10.0
    _timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[arg-type]
        self._start_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._timer is not None and self.conn.their_state is not h11.IDLE:  # a whole head arrived
            self._stop_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:  # waiting for the next request
            self._start_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def _start_deadline(self) -> None:
        self._stop_deadline()
        if self.header_timeout_s > 0:
            self._timer = self.loop.call_later(self.header_timeout_s, self._timed_out)

    def _stop_deadline(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        started_a_head = bool(self.conn.trailing_data[0])
        if started_a_head:
            log.info("%s: request head incomplete after %g s; answered 408", self.client, self.header_timeout_s)
            self.transport.write(response_408(self.header_timeout_s))
        self.transport.close()


def header_timeout_protocol(timeout_s: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class to hand uvicorn as ``http=``, with its deadline set to ``timeout_s``."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout_s": timeout_s})
