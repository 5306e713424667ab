"""API keys (random, shown once, salted hashes, revocable), authentication and the rate limit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from agentwatch import cli

from agentwatch_platform.collector.auth.authenticator import Authenticator
from agentwatch_platform.collector.auth.keys import Grant, KeyAdminError, KeyRing
from agentwatch_platform.collector.ingest.otlp.errors import RateLimited
from agentwatch_platform.collector.ingest.rate_limit import RateLimiter
from agentwatch_platform.collector.storage.base import Store
from tests.collector.ingest_helpers import CollectorProcess, agent_trace, serve, settings_for
from tests.support import local_http

PROTOBUF = {"Content-Type": "application/x-protobuf"}


def test_keys_are_random_hashed_and_verified(store: Store) -> None:
    ring = KeyRing(store)
    first, second = ring.create("alpha", name="ci"), ring.create("alpha")
    assert first.key != second.key and first.key.startswith(f"aw_{first.info.key_id}_")
    assert ring.grant(first.key) == Grant(first.info.key_id, "alpha", frozenset(first.info.scopes))
    stored = store.query("SELECT salt, key_hash FROM api_keys WHERE key_id = {k:String}", {"k": first.info.key_id})
    assert first.key.split("_", 2)[2] not in str(stored) and len(stored[0]["salt"]) == 32
    tampered = first.key[:-1] + ("A" if first.key[-1] != "A" else "B")
    assert ring.grant(tampered) is None
    assert ring.grant("not-a-key") is None


def test_revoked_key_stops_working_at_once(store: Store) -> None:
    ring = KeyRing(store)
    new = ring.create("alpha")
    auth = Authenticator(lambda: ring)
    assert (grant := auth.grant(new.key)) is not None and grant.project == "alpha"
    info = ring.revoke(new.info.key_id)
    auth.forget(new.info.key_id)
    assert info.revoked_at is not None
    assert auth.grant(new.key) is None
    assert [k.revoked_at is not None for k in ring.list()] == [True]
    with pytest.raises(KeyAdminError, match="no API key"):
        ring.revoke("ffffffffffff")
    with pytest.raises(KeyAdminError, match="invalid project"):
        ring.create("bad project!")


def test_rate_limiter_token_bucket() -> None:
    now = [0.0]
    limiter = RateLimiter(100, clock=lambda: now[0])
    limiter.check("k")
    limiter.spend("k", 150)
    with pytest.raises(RateLimited) as info:
        limiter.check("k")
    assert info.value.retry_after == pytest.approx(0.5)
    limiter.check("other")  # per key
    now[0] = 0.6
    limiter.check("k")


def test_rate_limit_answers_429_with_retry_after(tmp_path: Path) -> None:
    with serve(settings_for(tmp_path / "data", rate_limit_spans_per_s=5)) as collector:
        key = collector.key("limited")
        body = agent_trace(os.urandom(16), llm_calls=9).SerializeToString()
        headers = {**PROTOBUF, "Authorization": f"Bearer {key}"}
        assert local_http.post(collector.url + "/v1/traces", content=body, headers=headers).status_code == 200
        response = local_http.post(collector.url + "/v1/traces", content=body, headers=headers)
        assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1


def _cli(capsys: pytest.CaptureFixture[str], *args: str, data_dir: Path) -> str:
    """``agentwatch keys ...`` (the real command line, in this process); its output."""
    assert cli.main(["keys", *args, "--data-dir", str(data_dir)]) == 0
    return capsys.readouterr().out


def test_keys_cli_with_and_without_a_running_collector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    offline_key = _cli(capsys, "create", "--project", "alpha", data_dir=data).strip().splitlines()[-1]
    collector = CollectorProcess(data).start()  # owns the chDB directory now: keys go through it
    try:
        online_key = _cli(capsys, "create", "--project", "beta", "--name", "ci", data_dir=data).strip().splitlines()[-1]
        for key in (offline_key, online_key):
            response = local_http.post(
                collector.url + "/v1/traces",
                content=agent_trace(os.urandom(16)).SerializeToString(),
                headers={**PROTOBUF, "Authorization": f"Bearer {key}"},
            )
            assert response.status_code == 200
        key_id = online_key.split("_")[1]
        assert "Revoked" in _cli(capsys, "revoke", key_id, data_dir=data)
        with pytest.raises(
            SystemExit, match="agentwatch keys: the collector answered 404: no API key with id 'nosuchkey'"
        ):
            cli.main(["keys", "revoke", "nosuchkey", "--data-dir", str(data)])
        response = local_http.post(
            collector.url + "/v1/traces", content=b"", headers={**PROTOBUF, "Authorization": f"Bearer {online_key}"}
        )
        assert response.status_code == 401
        listing = _cli(capsys, "list", data_dir=data)
        assert "alpha" in listing and "beta" in listing and "revoked" in listing
        assert online_key not in listing and offline_key not in listing
        assert (
            local_http.post(
                collector.url + "/admin/keys", json={"project": "x"}, headers={"Authorization": "Bearer wrong"}
            ).status_code
            == 401
        )
    finally:
        collector.kill()


def test_keys_cli_scopes_default_to_ingest_and_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    agent = _cli(capsys, "create", "--project", "alpha", "--name", "agent", data_dir=data)
    assert "with scopes ingest." in agent
    ops = _cli(capsys, "create", "--project", "alpha", "--name", "ops", "--scope", "read, admin", data_dir=data)
    assert "with scopes read,admin." in ops
    with pytest.raises(SystemExit, match="--scope: invalid scopes 'root'"):
        cli.main(["keys", "create", "--project", "alpha", "--scope", "root", "--data-dir", str(data)])
    listing = {line.split()[-1]: line for line in _cli(capsys, "list", data_dir=data).splitlines()[1:]}
    assert "ingest " in listing["agent"] and "read,admin" in listing["ops"]
    keys = json.loads(_cli(capsys, "list", "--json", data_dir=data))
    assert sorted((k["name"], tuple(k["scopes"]), k["legacy"]) for k in keys) == [
        ("agent", ("ingest",), False),
        ("ops", ("read", "admin"), False),
    ]
