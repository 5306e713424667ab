"""The alerts bring their own settings into the collector (``collector.plugins.Plugin.settings``):
read from ``AGENTWATCH_ALERT_*`` when the app is made, a bad one stopping the start, and none
of them among the collector's own."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from agentwatch_platform.alerts.plugin import AlertsPlugin
from agentwatch_platform.collector.app import create_app
from agentwatch_platform.collector.settings import Settings
from tests.collector.ingest_helpers import settings_for


def test_the_alerts_settings_come_with_the_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWATCH_ALERT_INTERVAL_S", "7")
    monkeypatch.setenv("AGENTWATCH_ALERT_RULES", "/etc/rules.yaml")
    app = create_app(settings_for(tmp_path / "data"), plugins=(AlertsPlugin(),))
    brought = app.state.plugin_settings["alerts"]
    assert (brought.alert_interval_s, brought.alert_rules) == (7.0, "/etc/rules.yaml")
    assert not [f.name for f in fields(Settings) if f.name.startswith("alert")]


def test_a_bad_alerts_setting_stops_the_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWATCH_ALERT_INTERVAL_S", "-1")
    with pytest.raises(ValueError, match="AGENTWATCH_ALERT_INTERVAL_S"):
        create_app(settings_for(tmp_path / "data"), plugins=(AlertsPlugin(),))
