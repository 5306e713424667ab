"""Fixtures for every directory: a free loopback port, one ClickHouse HTTP interface a session.

Helpers that test files import live in ``tests.support``; this file imports nothing of the
platform, so ``tests/sdk`` runs with the SDK alone.
"""

from __future__ import annotations

import pytest

from tests.support.clickhouse import clickhouse_url  # noqa: F401 (one ClickHouse HTTP interface a session, for every directory)
from tests.support.ports import free_port


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on the ClickHouse HTTP interface is marked ``clickhouse_server`` (the store fixtures'
    server back end marks its own parameter): ``make quick`` leaves them out, ``make test`` runs them."""
    for item in items:
        if "clickhouse_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.clickhouse_server)


@pytest.fixture
def port() -> int:
    return free_port()
