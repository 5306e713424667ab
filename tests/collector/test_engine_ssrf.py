"""Engine registration cannot make the collector request what it should not (SSRF): only an
admin may register, URLs are checked at registration and at every scrape (DNS rebinding), no
redirect is followed, responses are bounded in size and time, engines are capped and
deletable. Real HTTP servers on 127.0.0.1; DNS is the one thing faked (outside the machine)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentwatch_platform.collector.engines.scrape_guard import HostPolicy, TargetRefused
from agentwatch_platform.collector.engines.scraper import EngineScraper
from tests.reliability.helpers import InProcess, in_process
from tests.support.poll import wait_until
from tests.support.ports import free_port

METRICS = b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 2.0\n'


class Upstream:
    """An engine's /metrics, and the misbehaviours a hostile target could show."""

    def __init__(self) -> None:
        self.hits: list[tuple[str, str]] = []  # (path, Host header)
        self.stop = threading.Event()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                upstream.hits.append((self.path, self.headers.get("Host", "")))
                if self.path == "/metrics":
                    self._send(200, METRICS)
                elif self.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path == "/big":
                    self._send(200, b"# " + b"x" * (3 * 1024 * 1024) + b"\n")
                elif self.path == "/slow":
                    self.send_response(200)
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    while not upstream.stop.wait(0.1):  # a byte now and then: no read ever times out
                        try:
                            self.wfile.write(b"#")
                            self.wfile.flush()
                        except OSError:
                            return
                else:
                    self._send(404, b"")

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.close()


class FakeDns:
    """Answers set by the test: what a hostile DNS server could answer, one call to the next."""

    def __init__(self) -> None:
        self.answers: dict[str, list[str]] = {}

    async def __call__(self, host: str, port: int) -> list[str]:
        if host in self.answers:
            return self.answers[host]
        if host.replace(".", "").isdigit() or ":" in host:
            return [host]
        raise OSError(f"{host}: unknown to the test resolver")


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcess, dict[str, str], FakeDns]]:
    dns = FakeDns()
    data = tmp_path_factory.mktemp("ssrf") / "data"
    with in_process(
        data,
        scrape_interval_s=0.3,
        max_engines_per_project=3,
        scrape_allowed_hosts="10.0.0.0/8,engine.test,169.254.0.0/16",
    ) as running:
        running.app.state.scrape_policy.resolve = dns
        ring = running.app.state.keyring
        keys = {
            "admin": ring.create("eng", scopes="admin").key,
            "read": ring.create("eng", scopes="ingest,read").key,
            "other-admin": ring.create("other", scopes="admin").key,
        }
        yield running, keys, dns


def _auth(keys: dict[str, str], who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {keys[who]}"}


def _register(running: InProcess, keys: dict[str, str], name: str, url: str, who: str = "admin") -> Any:
    return running.client.post("/api/admin/engines", json={"name": name, "url": url}, headers=_auth(keys, who))


def _delete_all(running: InProcess, keys: dict[str, str]) -> None:
    for engine in running.client.get("/api/admin/engines", headers=_auth(keys, "admin")).json():
        running.client.delete(f"/api/admin/engines/{engine['engine']}", headers=_auth(keys, "admin"))


def _own_scraper_passes(running: InProcess, engine: str, passes: int) -> None:
    """Until the collector's own scraper (every 0.3 s) has failed ``passes`` times on ``engine``
    since this call: its passes are sequential, so any request it began before has ended."""
    status = running.app.state.scraper.status
    since = time.time()
    failed: list[float] = []

    def passed() -> bool:
        now = status.get(("eng", engine), {})
        if not now.get("ok", True) and now["at"] > max([since, *failed]):
            failed.append(now["at"])
        return len(failed) >= passes

    wait_until(passed, 60, f"the collector's own scraper did not pass over {engine} {passes} times")


def _scraper(running: InProcess, **kwargs: Any) -> EngineScraper:
    return EngineScraper(running.app.state.store, [], policy=running.app.state.scrape_policy, **kwargs)


def test_a_project_key_without_admin_cannot_register(
    collector: tuple[InProcess, dict[str, str], FakeDns], upstream: Upstream
) -> None:
    running, keys, _ = collector
    for path in ("/api/admin/engines", "/api/engines"):
        response = running.client.post(path, json={"name": "x", "url": upstream.url}, headers=_auth(keys, "read"))
        assert response.status_code == 403 and "admin" in response.json()["detail"]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://169.254.10.1:8000/metrics", "link-local"),
        ("http://[fe80::1]:8000/metrics", "link-local"),
        ("http://[::ffff:169.254.169.254]/", "metadata"),
        ("http://100.100.100.200/", "metadata"),
        ("http://0.0.0.0:8000/metrics", "unspecified"),
        ("http://192.168.1.20:8000/metrics", "AGENTWATCH_SCRAPE_ALLOWED_HOSTS"),
        ("http://unknown.example:8000/metrics", "cannot resolve"),
        ("http://user:secret@127.0.0.1:8000/metrics", "credentials"),
    ],
)
def test_refused_urls_say_why(collector: tuple[InProcess, dict[str, str], FakeDns], url: str, reason: str) -> None:
    running, keys, _ = collector
    response = _register(running, keys, "bad", url)
    assert response.status_code == 400 and reason in response.json()["detail"], response.text


def test_non_http_schemes_are_422(collector: tuple[InProcess, dict[str, str], FakeDns]) -> None:
    running, keys, _ = collector
    for url in ("file:///etc/passwd", "gopher://127.0.0.1:25/", "ftp://127.0.0.1/"):
        assert _register(running, keys, "bad", url).status_code == 422


def test_allow_list_admits_private_networks_and_named_hosts_never_link_local(
    collector: tuple[InProcess, dict[str, str], FakeDns],
) -> None:
    running, keys, dns = collector
    _delete_all(running, keys)
    assert _register(running, keys, "lan", "http://10.1.2.3:8000/metrics").status_code == 201
    dns.answers["engine.test"] = ["192.168.7.7"]
    assert _register(running, keys, "named", "http://engine.test:8000/metrics").status_code == 201
    dns.answers["engine.test"] = ["127.0.0.1", "169.254.169.254"]  # one bad address among good ones
    refused = _register(running, keys, "named", "http://engine.test:8000/metrics")
    assert refused.status_code == 400 and "metadata" in refused.json()["detail"]
    _delete_all(running, keys)


def test_loopback_engine_is_registered_and_scraped(
    collector: tuple[InProcess, dict[str, str], FakeDns], upstream: Upstream
) -> None:
    running, keys, _ = collector
    _delete_all(running, keys)
    created = _register(running, keys, "local", upstream.url)
    assert created.status_code == 201 and created.json()["project"] == "eng"
    scraper = _scraper(running, timeout_s=2.0)
    assert asyncio.run(scraper.scrape_once()) == 1
    assert scraper.status[("eng", "local")]["ok"] is True
    _delete_all(running, keys)


def test_dns_rebinding_is_caught_at_scrape_time(
    collector: tuple[InProcess, dict[str, str], FakeDns], upstream: Upstream
) -> None:
    running, keys, dns = collector
    _delete_all(running, keys)
    dns.answers["engine.test"] = ["127.0.0.1"]
    assert _register(running, keys, "rebind", f"http://engine.test:{upstream.port}/metrics").status_code == 201
    scraper = _scraper(running, timeout_s=2.0)
    assert asyncio.run(scraper.scrape_once()) == 1
    assert upstream.hits[-1] == ("/metrics", f"engine.test:{upstream.port}")  # the checked address, the name in Host
    dns.answers["engine.test"] = ["169.254.169.254"]
    _own_scraper_passes(running, "rebind", 1)  # what it began before the change is finished
    before = len(upstream.hits)
    assert asyncio.run(scraper.scrape_once()) == 0
    status = scraper.status[("eng", "rebind")]
    assert status["ok"] is False and "169.254.169.254" in status["error"] and "metadata" in status["error"]
    _own_scraper_passes(running, "rebind", 2)
    assert len(upstream.hits) == before  # nothing requested since: neither scraper connects to the new address
    _delete_all(running, keys)


@pytest.mark.parametrize(
    ("path", "reason"),
    [("/redirect", "redirects are not followed"), ("/big", "larger than"), ("/slow", "no complete response within")],
)
def test_redirects_oversize_and_slow_responses_are_cut_off(
    collector: tuple[InProcess, dict[str, str], FakeDns], upstream: Upstream, path: str, reason: str
) -> None:
    running, keys, _ = collector
    _delete_all(running, keys)
    assert _register(running, keys, "hostile", upstream.url + path).status_code == 201
    scraper = _scraper(running, timeout_s=1.0, max_bytes=1024 * 1024)
    started = time.monotonic()
    assert asyncio.run(scraper.scrape_once()) == 0
    assert time.monotonic() - started < 3.0
    status = scraper.status[("eng", "hostile")]
    assert status["ok"] is False and reason in status["error"], status
    assert all(hit[0] != "/latest/meta-data/" for hit in upstream.hits)
    _delete_all(running, keys)


def test_the_reason_shows_on_the_engine_status(
    collector: tuple[InProcess, dict[str, str], FakeDns], upstream: Upstream
) -> None:
    """The collector's own scraper (every 0.3 s here) records why a target failed; admins read it."""
    running, keys, _ = collector
    _delete_all(running, keys)
    assert _register(running, keys, "moved", upstream.url + "/redirect").status_code == 201

    def reported() -> bool:
        engines = running.client.get("/api/admin/engines", headers=_auth(keys, "admin")).json()
        return any(e["engine"] == "moved" and e["ok"] is False and "redirect" in e["error"] for e in engines)

    wait_until(reported, 10.0, "the redirect was not reported on GET /api/admin/engines")
    _delete_all(running, keys)


def test_engines_are_capped_listed_and_deleted_per_project(
    collector: tuple[InProcess, dict[str, str], FakeDns], upstream: Upstream
) -> None:
    running, keys, _ = collector
    _delete_all(running, keys)
    for i in range(3):
        assert _register(running, keys, f"e{i}", upstream.url).status_code == 201
    over = _register(running, keys, "e3", upstream.url)
    assert over.status_code == 409 and "AGENTWATCH_MAX_ENGINES_PER_PROJECT" in over.json()["detail"]
    assert _register(running, keys, "e0", upstream.url + "/metrics").status_code == 201  # re-pointing is no new engine
    assert running.client.delete("/api/admin/engines/e1", headers=_auth(keys, "other-admin")).status_code == 404
    assert running.client.delete("/api/admin/engines/e1", headers=_auth(keys, "admin")).status_code == 204
    assert running.client.delete("/api/admin/engines/e1", headers=_auth(keys, "admin")).status_code == 404
    assert _register(running, keys, "e3", upstream.url).status_code == 201
    listed = running.client.get("/api/admin/engines", headers=_auth(keys, "admin")).json()
    assert sorted(e["engine"] for e in listed) == ["e0", "e2", "e3"]
    audit = running.client.get("/api/admin/audit", headers=_auth(keys, "admin")).json()
    assert ("engine.delete", "e1") in [(a["action"], a["target"]) for a in audit]
    _delete_all(running, keys)


def test_policy_unit_checks() -> None:
    policy = HostPolicy.from_setting("")
    for url in ("http://127.0.0.1/", "https://[::1]:8443/metrics"):
        asyncio.run(policy.pin(url))
    with pytest.raises(TargetRefused, match="neither loopback"):
        asyncio.run(policy.pin("http://8.8.8.8/metrics"))
    with pytest.raises(TargetRefused, match="cannot resolve"):  # a name IDNA cannot encode: refused, never a 500
        asyncio.run(policy.pin("http://\ufff9x/metrics"))


def test_registered_before_the_guard_is_still_refused_at_scrape(
    collector: tuple[InProcess, dict[str, str], FakeDns], tmp_path: Path
) -> None:
    """A target stored by an older collector (no checks then) is checked when scraped."""
    running, keys, _ = collector
    from agentwatch_platform.collector.engines.scraper import register_engine

    register_engine(running.app.state.store, "eng", "legacy", "http://169.254.169.254/latest/meta-data/")
    scraper = _scraper(running, timeout_s=1.0)
    asyncio.run(scraper.scrape_once())
    assert "metadata" in scraper.status[("eng", "legacy")]["error"]
    _delete_all(running, keys)
