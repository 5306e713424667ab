"""A free loopback port for a test's own server (``bench.ports`` is the benchmarks' twin: they
run without the tests)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
