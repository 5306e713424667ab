"""What every response carries and never carries: security headers on every answer (errors
included; ``no-store`` on the API, which returns captured prompts), and never a secret the
caller sent (a wrong key, an engine URL's credentials) in an error. Real app in-process over chDB."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from agentwatch_platform.collector.auth.scopes import SCOPES
from tests.collector.ingest_helpers import agent_trace
from tests.reliability.helpers import PROTOBUF, InProcess, in_process

MARKER = "Zq9SECRETzq9"  # never a word any message would contain on its own
PROJECT = "hygiene"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcess, dict[str, str]]]:
    with in_process(tmp_path_factory.mktemp("hygiene") / "data") as running:
        keyring = running.app.state.keyring
        keys = {scope: keyring.create(PROJECT, scopes=scope).key for scope in SCOPES}
        running.keys[PROJECT] = keys["ingest"]
        yield running, keys


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _operations(running: InProcess) -> list[tuple[str, str]]:
    spec = running.client.get("/openapi.json").json()
    return [
        (method.upper(), path.replace("{trace_id}", "0" * 32).replace("{key_id}", "0" * 12).replace("{name}", "e"))
        for path, ops in spec["paths"].items()
        for method in ops
    ]


def _assert_secured(response: Any, *, private: bool) -> None:
    headers = response.headers
    assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
    assert (
        headers["referrer-policy"] == "no-referrer" and "frame-ancestors 'none'" in headers["content-security-policy"]
    )
    assert (headers.get("cache-control") == "no-store") == private, (response.request.url, headers.get("cache-control"))


def test_every_answer_carries_the_security_headers(api: tuple[InProcess, dict[str, str]]) -> None:
    running, keys = api
    client = running.client
    exported = client.post(
        "/v1/traces",
        content=agent_trace(os.urandom(16)).SerializeToString(),
        headers={**PROTOBUF, **_bearer(keys["ingest"])},
    )
    assert exported.status_code == 200
    _assert_secured(exported, private=True)
    for path, key, status in (
        ("/api/runs", keys["read"], 200),
        ("/api/runs", "", 401),
        ("/api/runs", keys["ingest"], 403),
        ("/api/runs", keys["read"] + "x", 401),
        ("/api/nowhere", keys["read"], 404),
    ):
        response = client.get(path, headers=_bearer(key) if key else {})
        assert response.status_code == status
        _assert_secured(response, private=True)
    for path in ("/health", "/metrics", "/openapi.json"):
        _assert_secured(client.get(path), private=False)
    assert (
        client.get("/api/runs", headers=_bearer(keys["read"])).headers["content-security-policy"]
        == "default-src 'none'; frame-ancestors 'none'"
    )
    docs = client.get("/docs")
    assert (
        docs.status_code == 200 and docs.headers["content-security-policy"] == "frame-ancestors 'none'"
    )  # its scripts still load


@pytest.mark.parametrize("token", [f"aw_0123456789ab_{MARKER}", MARKER, f"aw_{MARKER}_x", f"Basic {MARKER}"])
def test_a_wrong_key_is_never_echoed_by_any_endpoint(api: tuple[InProcess, dict[str, str]], token: str) -> None:
    running, _ = api
    for method, path in _operations(running):
        headers = {"Authorization": token if token.startswith("Basic") else f"Bearer {token}"}
        response = running.client.request(method, path, headers=headers, json={} if method in ("POST", "PUT") else None)
        keyed = path.startswith(("/api", "/v1"))  # the probes are public: they answer without looking at keys
        # 401; 403 for a route missing from ROUTE_SCOPES, refused to everyone before any key is looked at
        assert response.status_code in (401, 403) if keyed else response.status_code < 500, (
            method,
            path,
            response.status_code,
        )
        assert MARKER not in response.text and MARKER not in str(response.headers), (method, path, response.text)


def test_a_valid_key_without_the_scope_is_not_echoed_either(api: tuple[InProcess, dict[str, str]]) -> None:
    running, keys = api
    secret = keys["ingest"].split("_", 2)[2]  # aw_<key id>_<secret>; the secret may hold "_" itself
    response = running.client.get("/api/runs", headers=_bearer(keys["ingest"]))
    assert response.status_code == 403 and "read" in response.json()["detail"] and secret not in response.text


@pytest.mark.parametrize(
    "url",
    [
        f"http://user:{MARKER}@/metrics",
        f"ftp://user:{MARKER}@127.0.0.1/metrics",
        f"http://user:{MARKER}@127.0.0.1:99999/metrics",
        f"http://{MARKER}@127.0.0.1/metrics",
    ],
)
def test_engine_url_credentials_are_never_echoed(api: tuple[InProcess, dict[str, str]], url: str) -> None:
    running, keys = api
    response = running.client.post(
        "/api/admin/engines", json={"name": "e1", "url": url}, headers=_bearer(keys["admin"])
    )
    assert response.status_code in (400, 422) and MARKER not in response.text, response.text
    listed = running.client.get("/api/admin/engines", headers=_bearer(keys["admin"])).text
    assert MARKER not in listed
