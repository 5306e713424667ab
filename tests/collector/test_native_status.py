"""A collector without its native decoder says so once at start, and in ``/metrics``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agentwatch_platform.collector.app import create_app
from agentwatch_platform.collector.ingest.otlp import native
from tests.collector.ingest_helpers import settings_for

GAUGE = "agentwatch_collector_native_decoder"


def _started(tmp_path: Path) -> str:
    """``/metrics`` of a collector that started and stopped."""
    with TestClient(create_app(settings_for(tmp_path / "data", require_auth=False))) as client:
        return client.get("/metrics").text


def test_without_the_native_decoder_the_collector_warns_once_and_shows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(native, "AVAILABLE", False)
    monkeypatch.setattr(native, "NOT_BUILT", "No module named 'agentwatch_platform.collector.ingest.otlp._native'")
    with caplog.at_level(logging.WARNING, logger="agentwatch_platform.collector.app"):
        metrics = _started(tmp_path)
    warnings = [r.getMessage() for r in caplog.records if "native OTLP decoder is not built" in r.getMessage()]
    assert len(warnings) == 1 and "agentwatch_platform.collector.ingest.otlp._native" in warnings[0]
    assert f"{GAUGE} 0.0" in metrics


def test_with_the_native_decoder_the_gauge_is_one(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert native.AVAILABLE, "the native decoder is built in the test environment (make setup)"
    with caplog.at_level(logging.WARNING, logger="agentwatch_platform.collector.app"):
        metrics = _started(tmp_path)
    assert f"{GAUGE} 1.0" in metrics
    assert not [r for r in caplog.records if "native OTLP decoder" in r.getMessage()]
