"""API keys (random, shown once, salted hashes, revocable), authentication and the rate limit."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from collector.auth import Authenticator, RateLimiter
from collector.keys import KeyAdminError, KeyRing
from collector.otlp.errors import RateLimited
from collector.storage.chdb_store import ChdbStore
from tests.collector.ingest_helpers import REPO, CollectorProcess, agent_trace, serve, settings_for

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ChdbStore]:
    store = ChdbStore(tmp_path / "chdb")
    store.migrate()
    yield store
    store.close()


def test_keys_are_random_hashed_and_verified(store: ChdbStore) -> None:
    ring = KeyRing(store)
    first, second = ring.create("alpha", name="ci"), ring.create("alpha")
    assert first.key != second.key and first.key.startswith(f"aw_{first.info.key_id}_")
    assert ring.verify(first.key) == (first.info.key_id, "alpha")
    stored = store.query("SELECT salt, key_hash FROM api_keys WHERE key_id = {k:String}", {"k": first.info.key_id})
    assert first.key.split("_", 2)[2] not in str(stored) and len(stored[0]["salt"]) == 32
    tampered = first.key[:-1] + ("A" if first.key[-1] != "A" else "B")
    assert ring.verify(tampered) is None
    assert ring.verify("not-a-key") is None


def test_revoked_key_stops_working_at_once(store: ChdbStore) -> None:
    ring = KeyRing(store)
    new = ring.create("alpha")
    auth = Authenticator(lambda: ring)
    assert auth.authenticate(new.key) == "alpha"
    info = ring.revoke(new.info.key_id)
    auth.forget(new.info.key_id)
    assert info.revoked_at is not None
    assert auth.authenticate(new.key) is None
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
        assert httpx.post(collector.url + "/v1/traces", content=body, headers=headers).status_code == 200
        response = httpx.post(collector.url + "/v1/traces", content=body, headers=headers)
        assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1


def _cli(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector.cli", "keys", *args, "--data-dir", str(data_dir)], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_keys_cli_with_and_without_a_running_collector(tmp_path: Path) -> None:
    data = tmp_path / "data"
    offline = _cli("create", "--project", "alpha", data_dir=data)
    assert offline.returncode == 0, offline.stderr
    offline_key = offline.stdout.strip().splitlines()[-1]
    collector = CollectorProcess(data).start()
    try:
        online = _cli("create", "--project", "beta", "--name", "ci", data_dir=data)
        assert online.returncode == 0, online.stderr
        online_key = online.stdout.strip().splitlines()[-1]
        for key in (offline_key, online_key):
            response = httpx.post(collector.url + "/v1/traces", content=agent_trace(os.urandom(16)).SerializeToString(), headers={**PROTOBUF, "Authorization": f"Bearer {key}"})
            assert response.status_code == 200
        key_id = online_key.split("_")[1]
        assert _cli("revoke", key_id, data_dir=data).returncode == 0
        response = httpx.post(collector.url + "/v1/traces", content=b"", headers={**PROTOBUF, "Authorization": f"Bearer {online_key}"})
        assert response.status_code == 401
        listing = _cli("list", data_dir=data).stdout
        assert "alpha" in listing and "beta" in listing and "revoked" in listing
        assert online_key not in listing and offline_key not in listing
        assert httpx.post(collector.url + "/admin/keys", json={"project": "x"}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    finally:
        collector.kill()
