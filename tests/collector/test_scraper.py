"""The engine scraper against a real HTTP server exporting vLLM's metric names."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentwatch_platform.collector.engines.scraper import (
    EngineScraper,
    Target,
    parse_metrics,
    parse_targets,
    register_engine,
)
from agentwatch_platform.collector.storage.base import Store
from tests.support.ports import free_port

VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="sim-small"} 3.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="sim-small"} 1234.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="sim-small"} 2.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="sim-small"} 5.0
vllm:time_to_first_token_seconds_count{model_name="sim-small"} 5.0
vllm:time_to_first_token_seconds_sum{model_name="sim-small"} 1.5
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="sim-small"} NaN
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.0
"""
ENGINE_ROWS = "SELECT toString(project) AS project, toString(engine) AS engine, toString(metric) AS metric, labels, value FROM engine_metrics ORDER BY metric, toString(labels)"


class Exporter:
    """A stand-in for an LLM engine's /metrics: outside the machine in production."""

    def __init__(self) -> None:
        self.up = True
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if not exporter.up or self.path != "/metrics":
                    self.send_error(503 if not exporter.up else 404)
                    return
                body = VLLM_TEXT.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    e = Exporter()
    yield e
    e.close()


def test_targets_parse_names_urls_and_projects() -> None:
    targets = parse_targets(" a=http://h:8000 , b=http://user:pw@h:9/metrics@team-x,c=https://h/m/ ")
    assert targets == [
        Target("a", "http://h:8000/metrics", "default"),
        Target("b", "http://user:pw@h:9/metrics", "team-x"),
        Target("c", "https://h/m/", "default"),
    ]
    assert parse_targets("") == []
    for bad in ("noequals", "x=", "x=ftp://h/metrics", "=http://h"):
        with pytest.raises(ValueError, match="SCRAPE_TARGETS"):
            parse_targets(bad)


def test_only_vllm_samples_are_kept() -> None:
    samples = parse_metrics(VLLM_TEXT)
    names = [name for name, _, _ in samples]
    assert names == [
        "vllm:num_requests_running",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds_count",
        "vllm:time_to_first_token_seconds_sum",
    ]
    assert samples[2] == ("vllm:time_to_first_token_seconds_bucket", {"le": "0.1", "model_name": "sim-small"}, 2.0)


async def test_scrape_stores_samples_and_logs_a_dead_target_once(
    store: Store, exporter: Exporter, caplog: pytest.LogCaptureFixture
) -> None:
    scraper = EngineScraper(
        store,
        [Target("e1", exporter.url + "/metrics", "p1"), Target("dead", f"http://127.0.0.1:{free_port()}/metrics")],
    )
    with caplog.at_level(logging.WARNING, logger="agentwatch_platform.collector.engines.scraper"):
        assert await scraper.scrape_once() == 6
        assert await scraper.scrape_once() == 6
    rows = store.query(ENGINE_ROWS)
    assert len(rows) == 12 and {r["project"] for r in rows} == {"p1"} and {r["engine"] for r in rows} == {"e1"}
    assert rows[0]["metric"] == "vllm:generation_tokens_total" and rows[0]["labels"] == {"model_name": "sim-small"}
    assert scraper.errors["dead"] == 2 and len([r for r in caplog.records if "dead" in r.getMessage()]) == 1
    assert ("p1", "e1") in scraper.last_scrape


async def test_registered_engines_are_scraped_under_their_project(store: Store, exporter: Exporter) -> None:
    scraper = EngineScraper(store, [])
    assert await scraper.scrape_once() == 0
    register_engine(store, "team-b", "late", exporter.url)
    assert await scraper.scrape_once() == 6
    assert {(r["project"], r["engine"]) for r in store.query(ENGINE_ROWS)} == {("team-b", "late")}


async def test_scraper_runs_in_the_background_and_survives_an_outage(store: Store, exporter: Exporter) -> None:
    async with EngineScraper(store, [Target("e1", exporter.url + "/metrics")], interval_s=0.05) as scraper:
        await _until(lambda: len(scraper.last_scrape) == 1)
        exporter.up = False
        await _until(lambda: scraper.errors["e1"] >= 2)
        exporter.up = True
        seen = scraper.last_scrape[("default", "e1")]
        await _until(lambda: scraper.last_scrape[("default", "e1")] > seen)
    assert scraper._task is None
    await scraper.aclose()  # twice is fine


async def _until(condition, timeout: float = 20.0) -> None:  # noqa: ANN001
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_a_collector_without_the_scraping_role_does_not_scrape(store: Store, exporter: Exporter) -> None:
    """Where collectors share a store, only the holder of the engine-scraper role scrapes (collector.roles)."""
    role = {"held": False}
    async with EngineScraper(
        store, [Target("e1", exporter.url + "/metrics")], interval_s=0.05, may_scrape=lambda: role["held"]
    ) as scraper:
        await asyncio.sleep(0.3)  # several cycles without the role
        assert scraper.last_scrape == {} and store.query(ENGINE_ROWS) == []
        role["held"] = True  # taken over (its holder died)
        await _until(lambda: len(scraper.last_scrape) == 1)
