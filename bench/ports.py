"""A free loopback port for a benchmark's own servers.

Here rather than borrowed from the tests: a benchmark runs after a plain ``pip install .``,
without pytest or the test helpers.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
