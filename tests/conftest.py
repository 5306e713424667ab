"""Shared fixtures: free loopback ports and temporary data directories."""

from __future__ import annotations

import socket

import pytest

from tests.collector.store_fixtures import clickhouse_url  # noqa: F401 (one ClickHouse HTTP interface a session, for every directory)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def port() -> int:
    return free_port()
