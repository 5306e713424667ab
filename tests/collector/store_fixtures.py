"""Store fixtures over every back end: chDB always, a ClickHouse server when
``AGENTWATCH_CLICKHOUSE_URL`` is set (each test then gets its own database). A ``chdb://``
URL runs the clickhouse-connect back end over clickhouse-connect's own embedded client, in a
fresh directory per test: the driver path without a server.

Import the fixtures into a test module (``from tests.collector.store_fixtures import store``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from collector.storage.base import Store
from collector.storage.chdb_store import ChdbStore

CLICKHOUSE_URL = os.environ.get("AGENTWATCH_CLICKHOUSE_URL", "")
BACKENDS = ["chdb"] + (["clickhouse"] if CLICKHOUSE_URL else [])


def open_backend(backend: str, tmp: Path, *, retention_days: int = 30) -> Store:
    """A migrated, empty store of the given back end."""
    if backend == "chdb":
        store: Store = ChdbStore(tmp / "chdb", retention_days=retention_days)
    elif CLICKHOUSE_URL.startswith("chdb:"):
        from collector.storage.clickhouse_store import ClickHouseStore

        store = ClickHouseStore(f"chdb://{tmp / 'clickhouse-connect'}", retention_days=retention_days)
    else:
        store = _server_store(retention_days)
    store.migrate()
    return store


def _server_store(retention_days: int) -> Store:
    import clickhouse_connect

    from collector.storage.clickhouse_store import ClickHouseStore

    database = f"aw_test_{uuid.uuid4().hex[:12]}"
    admin = clickhouse_connect.get_client(dsn=CLICKHOUSE_URL)
    admin.command(f"CREATE DATABASE {database}")
    admin.close()
    parts = urlsplit(CLICKHOUSE_URL)
    return ClickHouseStore(urlunsplit(parts._replace(path=f"/{database}")), retention_days=retention_days)


def _drop(store: Store) -> None:
    store.close()
    if not CLICKHOUSE_URL or CLICKHOUSE_URL.startswith("chdb:") or isinstance(store, ChdbStore):
        return
    import clickhouse_connect

    database = urlsplit(store.url).path.strip("/")  # type: ignore[attr-defined]
    admin = clickhouse_connect.get_client(dsn=CLICKHOUSE_URL)
    admin.command(f"DROP DATABASE IF EXISTS {database}")
    admin.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = open_backend(request.param, tmp_path)
    yield s
    _drop(s)


@pytest.fixture(scope="module", params=BACKENDS)
def module_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One store for a module whose tests only read what the module seeded."""
    s = open_backend(request.param, tmp_path_factory.mktemp("store"))
    yield s
    _drop(s)
