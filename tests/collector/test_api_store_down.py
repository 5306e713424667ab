"""The query API with its store away: 503 with ``Retry-After`` and an answer that tells the client
to retry, never where the store is (the driver's error names the ClickHouse host, port and user);
the cause goes to the collector's log. A real collector (uvicorn on 127.0.0.1) whose ClickHouse
URL points where nothing listens."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.collector.ingest_helpers import Running, serve, settings_for
from tests.support import local_http
from tests.support.ports import free_port

PORT = free_port()  # nothing listens there
SECRET_URL = f"http://storeuser:hunter2@127.0.0.1:{PORT}/db"
ERRORS_LOG = "agentwatch_platform.collector.api.errors"


@pytest.fixture(scope="module")
def store_down(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    settings = settings_for(
        tmp_path_factory.mktemp("store-down") / "data", clickhouse_url=SECRET_URL, require_auth=False
    )
    with serve(settings) as running:
        yield running


@pytest.mark.parametrize("path", ["/api/runs", "/api/spans", "/api/engines", "/api/alerts"])
def test_a_query_with_the_store_down_is_a_503_that_names_no_store_address(
    store_down: Running, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=ERRORS_LOG)
    response = local_http.get(store_down.url + path, timeout=30)
    assert response.status_code == 503 and int(response.headers["Retry-After"]) >= 1
    assert response.json() == {"detail": "store unavailable; retry later"}
    for secret in ("storeuser", "hunter2", "127.0.0.1", str(PORT)):
        assert secret not in response.text
    logged = [r.getMessage() for r in caplog.records if r.name == ERRORS_LOG]
    assert any(f"127.0.0.1:{PORT}" in m for m in logged), logged  # the operator learns where it was sought
