"""Store fixtures over both back ends: ``ChdbStore``, and ``ClickHouseStore`` over HTTP (each
test in its own database).

``ClickHouseStore`` talks to ``AGENTWATCH_CLICKHOUSE_URL`` when it is set (a ClickHouse server);
otherwise to ``tests.collector.clickhouse_http``, the ClickHouse HTTP interface over chDB in a
subprocess, so clickhouse-connect's HTTP client and the shared SQL run in every test run.

Import the fixtures into a test module (``from tests.collector.store_fixtures import store``).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.chdb_store import ChdbStore

# The server back end's runs carry the clickhouse_server marker (make quick leaves them out).
BACKENDS = ["chdb", pytest.param("clickhouse", marks=pytest.mark.clickhouse_server)]


def open_backend(backend: str, tmp: Path, *, retention_days: int = 30, clickhouse_url: str = "") -> Store:
    """A migrated, empty store of the given back end (the one in ``tmp`` reopened, if there is one)."""
    if backend == "chdb":
        if not (tmp / "chdb").exists():
            shutil.copytree(_migrated_template(retention_days), tmp / "chdb", symlinks=True)
        store: Store = ChdbStore(tmp / "chdb", retention_days=retention_days)
    else:
        store = _server_store(clickhouse_url, retention_days)
    store.migrate()  # on a copy of the template: nothing to apply, as on every restart
    return store


_TEMPLATES: dict[int, Path] = {}


def _migrated_template(retention_days: int) -> Path:
    """An embedded store migrated from empty once a process, closed, for ``open_backend`` to copy:
    the files ``migrate()`` writes, in a third of its CPU time (its links are relative, so a
    copy is a store of its own). The migration from empty still runs here, once per process."""
    if retention_days not in _TEMPLATES:
        folder = Path(tempfile.mkdtemp(prefix="agentwatch-store-template-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        template = ChdbStore(folder / "chdb", retention_days=retention_days)
        template.migrate()
        template.close()
        _TEMPLATES[retention_days] = folder / "chdb"
    return _TEMPLATES[retention_days]


def scratch_database(url: str) -> str:
    """A new, empty database on the ClickHouse at ``url``; its URL."""
    import clickhouse_connect

    database = f"aw_test_{uuid.uuid4().hex[:12]}"
    admin = clickhouse_connect.get_client(dsn=url)
    admin.command(f"CREATE DATABASE {database}")
    admin.close()
    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))


def _server_store(url: str, retention_days: int) -> Store:
    from agentwatch_platform.collector.storage.clickhouse_store import ClickHouseStore

    return ClickHouseStore(scratch_database(url), retention_days=retention_days)


def _drop(store: Store) -> None:
    store.close()
    if isinstance(store, ChdbStore):
        return
    import clickhouse_connect

    parts = urlsplit(store.url)  # type: ignore[attr-defined]
    admin = clickhouse_connect.get_client(dsn=urlunsplit(parts._replace(path="/default")))
    admin.command(f"DROP DATABASE IF EXISTS {parts.path.strip('/')}")
    admin.close()


def _open(request: pytest.FixtureRequest, tmp: Path) -> Store:
    url = request.getfixturevalue("clickhouse_url") if request.param == "clickhouse" else ""
    return open_backend(request.param, tmp, clickhouse_url=url)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = _open(request, tmp_path)
    yield s
    _drop(s)


@pytest.fixture(scope="module", params=BACKENDS)
def module_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One store for a module whose tests only read what the module seeded."""
    s = _open(request, tmp_path_factory.mktemp("store"))
    yield s
    _drop(s)


def forget_rollup(store: Store, rollup: str, version: int) -> None:
    """Drop a rollup table and its view and forget the migration that made them: the store as it
    was before that migration, for the upgrade tests."""
    for statement in (
        f"DROP VIEW {rollup}_mv",
        f"DROP TABLE {rollup}",
        f"DELETE FROM schema_migrations WHERE version = {version}",
    ):
        store.command(statement)
