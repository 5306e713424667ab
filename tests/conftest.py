"""Fixtures for every directory: a free loopback port, one ClickHouse HTTP interface a session.

Helpers that test files import live in ``tests.support``; this file imports nothing of the
platform, so ``tests/sdk`` runs with the SDK alone.
"""

from __future__ import annotations

import pytest

from tests.support.clickhouse import clickhouse_url  # noqa: F401 (one ClickHouse HTTP interface a session, for every directory)
from tests.support.ports import free_port


@pytest.fixture
def port() -> int:
    return free_port()
