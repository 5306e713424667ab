"""Users and sessions over HTTP (``/api/users``, ``/api/sessions``): a run's user and session are
listed for its project only, and a bad parameter is a 422 naming it.

Apart from ``test_users.py``: a worker process holds one embedded chDB at a time, and that
module's store (``module_store``) would still be open when this module's collector opens its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.collector.ingest_helpers import Running, agent_trace, serve, settings_for
from tests.support import local_http
from tests.support.poll import wait_until


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, str]]:
    with serve(settings_for(Path(tmp_path_factory.mktemp("users")))) as running:
        yield running, running.key("users-http")


def _get(running: Running, key: str, path: str, **params: object) -> httpx.Response:
    return local_http.get(running.url + path, params=params, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_users_and_sessions_over_http(collector: tuple[Running, str]) -> None:
    running, key = collector
    request = agent_trace(os.urandom(16), 2)
    for span in request.resource_spans[0].scope_spans[0].spans:
        span.attributes.add(key="user.id").value.string_value = "carol"
        span.attributes.add(key="session.id").value.string_value = "c-1"
    response = local_http.post(
        running.url + "/v1/traces",
        content=request.SerializeToString(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-protobuf"},
        timeout=30,
    )
    assert response.status_code == 200
    wait_until(lambda: _get(running, key, "/api/users").json()["items"], 20, "the run's user never listed")
    found = _get(running, key, "/api/users").json()["items"]
    assert [u["user_id"] for u in found] == ["carol"] and found[0]["runs"] == 1
    assert _get(running, key, "/api/users", user_id="carol").json()["items"] == found
    assert _get(running, key, "/api/users", user_id="dave").json()["items"] == []
    assert _get(running, key, "/api/sessions").json()["items"][0]["session_id"] == "c-1"
    assert len(_get(running, key, "/api/sessions/c-1").json()["turns"]) == 1
    other = running.key("someone-else")
    assert _get(running, other, "/api/users").json()["items"] == []
    assert _get(running, other, "/api/sessions/c-1").status_code == 404


@pytest.mark.parametrize(
    ("path", "params", "names"),
    [
        ("/api/users", {"sort": "nonsense"}, "sort"),
        ("/api/users", {"limit": 0}, "limit"),
        ("/api/users", {"start": "yesterday"}, "start"),
        ("/api/sessions", {"offset": -1}, "offset"),
        ("/api/sessions", {"sort": "-user_id"}, "sort"),
        ("/api/sessions/x", {"end": "soon"}, "end"),
    ],
)
def test_bad_parameters_are_422_naming_them(
    collector: tuple[Running, str], path: str, params: dict, names: str
) -> None:
    running, key = collector
    response = _get(running, key, path, **params)
    assert response.status_code == 422 and names in str(response.json()["detail"])
