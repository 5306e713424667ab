"""The tests' HTTP requests to servers on 127.0.0.1: httpx's ``get``, ``post``... with a patient
default timeout.

httpx waits 5 s by default, which is a timing assumption: beside ``stress --cpu 8`` a collector took
longer than that to answer its first ``/openapi.json`` (``test_scopes``, issue 37's stress run 7).
A test that means to bound a wait passes its own ``timeout``.
"""

from __future__ import annotations

from typing import Any

import httpx

TIMEOUT_S = 120.0


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("timeout", TIMEOUT_S)
    return httpx.request(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return request("GET", url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return request("POST", url, **kwargs)


def put(url: str, **kwargs: Any) -> httpx.Response:
    return request("PUT", url, **kwargs)


def patch(url: str, **kwargs: Any) -> httpx.Response:
    return request("PATCH", url, **kwargs)


def delete(url: str, **kwargs: Any) -> httpx.Response:
    return request("DELETE", url, **kwargs)
