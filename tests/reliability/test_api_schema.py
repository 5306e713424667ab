"""Schemathesis over the whole HTTP API (every operation of the app's own OpenAPI schema), as
callers of every scope and none: no 5xx, and every response the schema documents is what the
schema says (a documented status, content type, headers, body;
collector/api/openapi.py documents the errors). Derandomized and bounded per operation, so
the run is the same every time and stays in seconds. Real app in-process over chDB."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from agentwatch_platform.collector.auth.scopes import SCOPES
from tests.collector.ingest_helpers import agent_trace
from tests.reliability.helpers import PROTOBUF, InProcess, in_process
from tests.support.examples import examples

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
    response_headers_conformance,
]
EXAMPLES = examples(12)  # per operation; callers and data are drawn together, so every scope is exercised
PROJECT = "schema"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcess, list[dict[str, str]]]]:
    """One run stored; a key of each scope alone, one of all of them, and no key at all."""
    with in_process(tmp_path_factory.mktemp("schema") / "data", rate_limit_spans_per_s=0.0) as running:
        keyring = running.app.state.keyring
        callers = [
            {"Authorization": f"Bearer {keyring.create(PROJECT, scopes=scope).key}"}
            for scope in (*SCOPES, ",".join(SCOPES))
        ]
        callers.append({})
        running.keys[PROJECT] = keyring.create(PROJECT, scopes="ingest").key
        assert (
            running.post_traces(agent_trace(os.urandom(16)).SerializeToString(), PROJECT, PROTOBUF).status_code == 200
        )
        running.drain()
        running.app.state.scrape_policy.resolve = _no_dns
        yield running, callers


async def _no_dns(host: str, port: int) -> list[str]:
    """Fuzzed engine URLs name random hosts: IP literals and localhost only, never a real resolver."""
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        if host == "localhost":
            return ["127.0.0.1"]
        host.encode("idna")  # a name the system resolver could not encode fails the same way
        raise OSError(f"{host}: no DNS in this test") from None


def _operations(running: InProcess) -> list[Any]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", running.app)
    return [result.ok() for result in schema.get_all_operations()]


def test_every_operation_answers_within_its_schema_for_every_scope(api: tuple[InProcess, list[dict[str, str]]]) -> None:
    running, callers = api
    operations = _operations(running)
    paths = {operation.path for operation in operations}
    assert {"/v1/traces", "/api/runs", "/api/admin/keys", "/health"} <= paths, paths
    for operation in operations:
        cases = st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE)
        )

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=cases, caller=st.sampled_from(callers))
        def check(case: Any, caller: dict[str, str]) -> None:
            headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
            response = case.call(headers={**headers, **caller})
            case.validate_response(response, checks=CHECKS)

        check()
