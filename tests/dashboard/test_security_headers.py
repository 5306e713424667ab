"""A real ``agentwatch dashboard`` server sends the security headers the collector sends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from agentwatch_platform.dashboard.security_headers import HEADERS
from tests.support import local_http
from tests.support.ports import free_port


@pytest.fixture(scope="module")
def dashboard() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentwatch", "dashboard", "--port", str(port), "--collector", "http://127.0.0.1:9"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "AGENTWATCH_DASHBOARD_OPEN": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if local_http.get(url + "/_stcore/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"the dashboard did not answer: {proc.stderr.read().decode() if proc.stderr else ''}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.mark.parametrize("path", ["/", "/_stcore/health", "/no/such/page"])
def test_every_response_carries_the_security_headers(dashboard: str, path: str) -> None:
    got = local_http.get(dashboard + path, timeout=30).headers
    for name, value in HEADERS:
        assert got.get(name.decode()) == value.decode(), (path, name, dict(got))
