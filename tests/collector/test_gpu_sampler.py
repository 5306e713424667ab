"""The GPU sampler: parsing of NVML readings and the no-GPU path."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from agentwatch_platform.collector.engines.gpu import (
    NO_GPU_MESSAGE,
    GpuSampler,
    load_nvml,
    rows_from_readings,
)

FIXTURE = Path(__file__).parent / "fixtures" / "nvml_readings.json"


def test_recorded_readings_become_engine_metric_rows() -> None:
    readings = json.loads(FIXTURE.read_text())["readings"]
    rows = rows_from_readings(readings, engine="vllm-a", ts=1700000000.0)
    by_key = {(metric, labels["gpu"]): (engine, ts, value) for engine, ts, metric, labels, value in rows}
    assert by_key[("gpu:utilization", "0")] == ("vllm-a", 1700000000.0, 87.0)
    assert by_key[("gpu:memory_used_bytes", "0")][2] == 73014444032.0
    assert by_key[("gpu:power_watts", "0")][2] == pytest.approx(612.345)
    assert by_key[("gpu:utilization", "1")][2] == 3.0
    assert ("gpu:power_watts", "1") not in by_key  # not reported: left out, not zero
    assert len(rows) == 5


@pytest.mark.skipif(load_nvml() is not None, reason="this machine has an NVIDIA GPU; the no-GPU path cannot run")
def test_without_nvml_the_sampler_says_so_once_and_does_nothing(caplog) -> None:
    received: list = []
    sampler = GpuSampler(received.append, engine="sim", interval_s=0.05)
    with caplog.at_level(logging.WARNING, logger="agentwatch_platform.collector.engines.gpu"):
        assert sampler.start() is False
    assert [r.getMessage() for r in caplog.records] == [NO_GPU_MESSAGE]
    assert not sampler.enabled
    assert not any(t.name == "agentwatch-gpu-sampler" for t in threading.enumerate())
    sampler.stop()
    sampler.stop()  # safe twice
    assert received == []


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        GpuSampler(print, engine="x", interval_s=0)


class RecordedNvml:
    """Stands in for the NVIDIA driver (hardware outside this machine), replaying the fixture."""

    def __init__(self, readings: list[dict]) -> None:
        self.readings = readings
        self.shutdowns = 0

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 (NVML's names)
        return len(self.readings)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict:  # noqa: N802
        return self.readings[index]

    def nvmlDeviceGetUtilizationRates(self, handle: dict):  # noqa: N802
        return type("Rates", (), {"gpu": handle["utilization_gpu"]})

    def nvmlDeviceGetMemoryInfo(self, handle: dict):  # noqa: N802
        return type("Memory", (), {"used": handle["memory_used"]})

    def nvmlDeviceGetPowerUsage(self, handle: dict) -> int:  # noqa: N802
        if handle["power_mw"] is None:
            raise RuntimeError("NVMLError_NotSupported")
        return handle["power_mw"]

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdowns += 1


def test_sampler_thread_hands_rows_to_the_sink_until_stopped() -> None:
    nvml = RecordedNvml(json.loads(FIXTURE.read_text())["readings"])
    batches: list[list] = []
    got_two = threading.Event()

    def sink(rows: list) -> None:
        batches.append(rows)
        if len(batches) >= 2:
            got_two.set()

    sampler = GpuSampler(sink, engine="vllm-a", interval_s=0.02, nvml=nvml)
    assert sampler.start() is True
    assert got_two.wait(5)
    sampler.stop()
    count = len(batches)
    assert all(len(rows) == 5 and rows[0][0] == "vllm-a" for rows in batches)
    assert not any(t.name == "agentwatch-gpu-sampler" for t in threading.enumerate())
    assert len(batches) == count and nvml.shutdowns == 1


def test_a_failing_sink_is_logged_and_counted_not_raised(caplog) -> None:
    def sink(rows: list) -> None:
        raise OSError("store down")

    sampler = GpuSampler(
        sink, engine="e", nvml=RecordedNvml([{"index": 0, "utilization_gpu": 1, "memory_used": 2, "power_mw": 3}])
    )
    with caplog.at_level(logging.ERROR, logger="agentwatch_platform.collector.engines.gpu"):
        assert sampler.sample_once() == []
    assert sampler.errors == 1 and "sample failed" in caplog.text


@pytest.mark.skipif(load_nvml() is None, reason="needs an NVIDIA GPU with NVML")
def test_real_gpu_readings_are_sampled() -> None:
    sampler = GpuSampler(lambda rows: None, engine="gpu-host", interval_s=60)
    assert sampler.start() is True
    rows = sampler.sample_once()
    sampler.stop()
    assert {metric for _, _, metric, _, _ in rows} >= {"gpu:utilization", "gpu:memory_used_bytes"}


def test_collector_files_gpu_samples_under_the_scraped_engine_or_as_told() -> None:
    from agentwatch_platform.collector.app import gpu_sampler_target
    from agentwatch_platform.collector.settings import Settings

    assert gpu_sampler_target(Settings(scrape_targets="vllm-a=http://127.0.0.1:8000@team")) == ("vllm-a", "team")
    assert gpu_sampler_target(Settings()) == ("local", "default")
    assert gpu_sampler_target(Settings(gpu_sampler="off")) is None
    assert gpu_sampler_target(Settings(gpu_sampler="vllm-b@lab")) == ("vllm-b", "lab")
    with pytest.raises(ValueError, match="AGENTWATCH_GPU_SAMPLER"):
        gpu_sampler_target(Settings(gpu_sampler="just-a-name"))


def test_collector_starts_its_gpu_sampler_and_runs_without_a_gpu(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from agentwatch_platform.collector.app import create_app
    from tests.collector.ingest_helpers import settings_for

    app = create_app(settings_for(tmp_path, require_auth=False))
    with TestClient(app) as client:
        assert app.state.gpu_sampler.enabled is (load_nvml() is not None)
        assert client.get("/api/engines").status_code == 200
