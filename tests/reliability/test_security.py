"""Security properties of the collector: keys (random, salted hashes, constant-time, revocable),
per-key rate limits, loopback binding, no CORS, bounded queries, redaction on both sides, and
configuration errors that name the key and the problem. Real app in-process over chDB."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import agentwatch
import pytest
from agentwatch.cli import build_parser

import agentwatch_platform.collector.auth.keys as keys_module
from agentwatch_platform.alerts.errors import RulesError
from agentwatch_platform.alerts.rules import load_rules
from agentwatch_platform.collector.settings import Settings
from tests.collector.ingest_helpers import agent_trace, otlp_request
from tests.reliability.helpers import PROTOBUF, InProcess, in_process

SECRETS = {
    "openai key": "sk-proj-abcdefghijklmnopqrstuvwx1234",
    "bearer token": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
    "e-mail": "jane.doe@example.com",
    "card number": "4111 1111 1111 1111",
}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with in_process(tmp_path_factory.mktemp("security") / "data", rate_limit_spans_per_s=100.0) as running:
        yield running


# --- keys ----------------------------------------------------------------------------------------


def test_keys_are_random_and_stored_only_as_salted_hashes(collector: InProcess) -> None:
    ring = collector.app.state.keyring
    first, second = ring.create("hashing"), ring.create("hashing")
    assert first.key != second.key and len(first.key) >= 40
    rows = collector.app.state.store.query("SELECT * FROM api_keys WHERE project = 'hashing'")
    dump = repr(rows)
    for new in (first, second):
        secret = new.key.split("_", 2)[2]
        assert secret not in dump and new.key not in dump, "a key is stored in plain text"
        row = next(r for r in rows if r["key_id"] == new.info.key_id)
        assert row["key_hash"] == hashlib.sha256(row["salt"].encode() + secret.encode()).hexdigest()
    assert len({r["salt"] for r in rows}) == len(rows), "salts must differ per key"


def test_keys_are_compared_in_constant_time(collector: InProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, object]] = []
    real = keys_module.hmac.compare_digest

    def spy(a: object, b: object) -> bool:
        calls.append((a, b))
        return real(a, b)  # type: ignore[arg-type]

    monkeypatch.setattr(keys_module.hmac, "compare_digest", spy)
    new = collector.app.state.keyring.create("ct")
    assert collector.app.state.keyring.grant(new.key) == keys_module.Grant(
        new.info.key_id, "ct", frozenset(new.info.scopes)
    )
    assert collector.app.state.keyring.grant(new.key[:-4] + "AAAA") is None
    assert len(calls) == 2


def test_revoked_key_is_refused_at_once_everywhere(collector: InProcess) -> None:
    new = collector.app.state.keyring.create("revoked")
    headers = {"Authorization": f"Bearer {new.key}"}
    body = agent_trace(os.urandom(16)).SerializeToString()
    assert collector.client.post("/v1/traces", content=body, headers={**PROTOBUF, **headers}).status_code == 200
    assert collector.client.get("/api/runs", headers=headers).status_code == 200  # now cached as valid
    admin = {"Authorization": f"Bearer {collector.app.state.admin_token}"}
    assert collector.client.post(f"/admin/keys/{new.info.key_id}/revoke", headers=admin).status_code == 200
    assert collector.client.post("/v1/traces", content=body, headers={**PROTOBUF, **headers}).status_code == 401
    assert collector.client.get("/api/runs", headers=headers).status_code == 401


def test_admin_endpoints_need_the_admin_token_or_an_admin_key(collector: InProcess) -> None:
    """No key or a bad one: 401; a project key without the admin scope: 403 (old and new paths)."""
    for headers, status in (
        ({}, 401),
        ({"Authorization": "Bearer " + "x" * 43}, 401),
        (collector.auth("someone"), 403),
    ):
        for path in ("/admin/keys", "/api/admin/keys"):
            assert collector.client.get(path, headers=headers).status_code == status
            assert collector.client.post(path, json={"project": "evil"}, headers=headers).status_code == status


def test_rate_limit_per_key_is_429_with_retry_after_and_spares_other_keys(collector: InProcess) -> None:
    body = otlp_request(os.urandom(16), [{"span_id": os.urandom(8)} for _ in range(80)]).SerializeToString()
    answers = [collector.post_traces(body, "greedy", PROTOBUF) for _ in range(4)]
    limited = [a for a in answers if a.status_code == 429]
    assert limited, [a.status_code for a in answers]
    assert all(float(a.headers["retry-after"]) >= 1 for a in limited)
    assert collector.post_traces(body, "modest", PROTOBUF).status_code == 200


# --- exposure ------------------------------------------------------------------------------------


def test_servers_bind_loopback_by_default() -> None:
    assert Settings.from_env().host == "127.0.0.1" or os.environ.get("AGENTWATCH_HOST")
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    hosts = {}
    for name, sub in subparsers.items():
        for action in sub._actions:
            if "--host" in action.option_strings:
                hosts[name] = action.default
    assert "collector" in hosts, hosts
    assert all(default in (None, "127.0.0.1", "localhost") for default in hosts.values()), hosts


def test_no_cors_headers_by_default(collector: InProcess) -> None:
    origin = {"Origin": "https://evil.example"}
    preflight = collector.client.options("/api/runs", headers={**origin, "Access-Control-Request-Method": "GET"})
    plain = collector.client.get("/api/runs", headers={**origin, **collector.auth("cors")})
    for response in (preflight, plain):
        assert not any(h.lower().startswith("access-control-") for h in response.headers), dict(response.headers)


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/runs", {"start": 0}),
        ("/api/runs", {"limit": 100_000}),
        ("/api/overview", {"start": 0}),
        ("/api/cost", {"start": "1970-01-01T00:00:00Z"}),
        ("/api/timeseries", {"metric": "runs", "start": time.time() - 300 * 86_400, "step_s": 1}),
        ("/api/runs", {"end": "nan"}),
    ],
)
def test_query_range_and_result_size_are_bounded(collector: InProcess, path: str, params: dict[str, object]) -> None:
    response = collector.client.get(path, params=params, headers=collector.auth("bounds"))
    assert response.status_code == 422, response.text[:300]
    assert response.json()["detail"], "the refusal must say what was wrong"


# --- redaction -----------------------------------------------------------------------------------


def test_collector_redacts_captured_content(collector: InProcess) -> None:
    """Content in the GenAI, OpenInference and OpenLLMetry attributes, also from agents without our SDK."""
    text = "call me: " + " / ".join(SECRETS.values())
    trace_id = os.urandom(16)
    body = otlp_request(
        trace_id,
        [
            {
                "span_id": os.urandom(8),
                "name": "chat sim-small",
                "attrs": {
                    "agentwatch.span.kind": "llm",
                    "gen_ai.request.model": "sim-small",
                    "gen_ai.input.messages": text,
                    "gen_ai.output.messages": text,
                    "gen_ai.prompt.0.content": text,
                    "input.value": text,
                    "llm.output_messages.0.message.content": text,
                    "exception.message": text,
                },
            }
        ],
    ).SerializeToString()
    assert collector.post_traces(body, "redact", PROTOBUF).status_code == 200
    collector.drain()
    rows = collector.app.state.store.query(
        "SELECT * FROM spans WHERE project = 'redact' AND trace_id = {t:String}", {"t": trace_id.hex()}
    )
    assert len(rows) == 1
    stored = repr(rows[0])
    assert "call me" in stored, "the content itself must be kept"
    leaked = [what for what, secret in SECRETS.items() if secret.split()[-1] in stored]
    assert not leaked, f"stored unredacted: {leaked}"


def test_sdk_redacts_before_anything_leaves_the_agent() -> None:
    for what in ("openai key", "bearer token", "e-mail"):
        out = agentwatch.redact_text(f"x {SECRETS[what]} y")
        assert SECRETS[what].split()[-1] not in out and out.startswith("x ") and out.endswith(" y"), (what, out)


# --- configuration errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("AGENTWATCH_PORT", "http", "expected an integer"),
        ("AGENTWATCH_REQUIRE_AUTH", "maybe", "true or false"),
        ("AGENTWATCH_FLUSH_INTERVAL_S", "soon", "expected a number"),
        ("AGENTWATCH_MAX_BODY_BYTES", "-5", ">= 0"),
        ("AGENTWATCH_SPOOL_MAX_BYTES", "-1", ">= 0"),
        ("AGENTWATCH_FLUSH_INTERVAL_S", "nan", "finite"),
        ("AGENTWATCH_PORT", "70000", "65535"),
    ],
)
def test_bad_configuration_names_the_variable_and_the_problem(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, problem: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError) as info:
        Settings.from_env()
    assert variable in str(info.value) and problem in str(info.value) and repr(value) in str(info.value)


@pytest.mark.parametrize(
    ("rules", "key", "problem"),
    [
        (
            "version: 1\nrules:\n  - name: r\n    metric: cost_usd\n    window: soon\n    condition: {kind: threshold, threshold: 1}\n",
            "rules[0].window",
            "duration",
        ),
        ("version: 1\nrules:\n  - name: r\n    metric: cost_usd\n    windw: 5m\n", "windw", "unknown key"),
        ("version: 1\nrules: [\n", "", "YAML"),
    ],
)
def test_bad_alert_rules_name_the_key_and_the_problem(tmp_path: Path, rules: str, key: str, problem: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(rules)
    with pytest.raises(RulesError) as info:
        load_rules(path)
    message = str(info.value)
    assert str(path) in message and key in message and problem in message, message
