"""One ClickHouse HTTP interface for the whole test session (``clickhouse_url``), imported by the root
``conftest.py`` so every directory shares it.

``AGENTWATCH_CLICKHOUSE_URL`` names a ClickHouse server to use instead; otherwise
``tests.collector.clickhouse_http`` (the ClickHouse HTTP interface over chDB) starts in a
subprocess the first time a test asks for it. Nothing is imported from the platform here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def clickhouse_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's URL, or the chDB-backed HTTP interface's, started for this test session."""
    if url := os.environ.get("AGENTWATCH_CLICKHOUSE_URL", ""):
        yield url
        return
    data = tmp_path_factory.mktemp("clickhouse-http")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.collector.clickhouse_http", str(data)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    if not port.isdigit():
        proc.kill()
        raise RuntimeError(f"the ClickHouse HTTP interface over chDB did not start (said {port!r})")
    yield f"http://127.0.0.1:{port}/default"
    proc.terminate()
    proc.wait(timeout=30)
