"""Fixtures for the alerts tests: a webhook receiver and an SMTP server on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller

from tests.collector.store_fixtures import store  # noqa: F401 (ChdbStore, and ClickHouseStore over HTTP)
from tests.support.ports import free_port
from tests.support.receivers import Mailbox, Receiver, receiver_handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    port = free_port()
    recv = Receiver(f"http://127.0.0.1:{port}/hook")
    server = ThreadingHTTPServer(("127.0.0.1", port), receiver_handler(recv))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield recv
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.fixture
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    yield mailbox, port
    controller.stop()
