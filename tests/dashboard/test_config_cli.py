"""The dashboard's settings and its ``agentwatch dashboard`` command line."""

from __future__ import annotations

import logging

import pytest
from agentwatch.cli import build_parser

from agentwatch_platform.collector.settings import Settings
from agentwatch_platform.dashboard import ui
from agentwatch_platform.dashboard.cli import streamlit_command, streamlit_env
from agentwatch_platform.dashboard.config import DashboardConfig


def test_login_mode_follows_open_flag_then_password(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGENTWATCH_DASHBOARD_OPEN", "AGENTWATCH_DASHBOARD_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    assert DashboardConfig.from_env().login_mode == "key"
    monkeypatch.setenv("AGENTWATCH_DASHBOARD_PASSWORD", "pw")
    assert DashboardConfig.from_env().login_mode == "password"
    monkeypatch.setenv("AGENTWATCH_DASHBOARD_OPEN", "1")
    assert DashboardConfig.from_env().login_mode == "open"


def test_bad_environment_value_is_logged_and_the_default_kept(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTWATCH_DASHBOARD_TIMEOUT_S", "soon")
    monkeypatch.setenv("AGENTWATCH_COLLECTOR_URL", "http://collector:4318/")
    with caplog.at_level(logging.WARNING):
        cfg = DashboardConfig.from_env()
    assert cfg.timeout_s == DashboardConfig.timeout_s and cfg.collector_url == "http://collector:4318"
    assert "AGENTWATCH_DASHBOARD_TIMEOUT_S='soon'" in caplog.text
    assert {name for name, _, _ in DashboardConfig.describe()} >= {
        "AGENTWATCH_COLLECTOR_URL",
        "AGENTWATCH_API_KEY",
        "AGENTWATCH_DASHBOARD_PASSWORD",
        "AGENTWATCH_DASHBOARD_OPEN",
    }


def test_dashboard_command_runs_streamlit_headless_with_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTWATCH_DASHBOARD_OPEN", raising=False)
    args = build_parser().parse_args(
        ["dashboard", "--collector", "http://c:1", "--api-key", "k", "--port", "8600", "--open"]
    )
    argv = streamlit_command(args)
    assert argv[1:4] == ["-m", "agentwatch_platform.dashboard.server", "run"] and argv[4].endswith("dashboard/app.py")
    assert argv[argv.index("--server.port") + 1] == "8600" and argv[argv.index("--server.address") + 1] == "127.0.0.1"
    assert argv[argv.index("--server.headless") + 1] == "true"
    env = streamlit_env(args)
    assert (env["AGENTWATCH_COLLECTOR_URL"], env["AGENTWATCH_API_KEY"], env["AGENTWATCH_DASHBOARD_OPEN"]) == (
        "http://c:1",
        "k",
        "1",
    )
    assert "AGENTWATCH_DASHBOARD_OPEN" not in streamlit_env(build_parser().parse_args(["dashboard"]))


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (0.0123, "USD", "$0.012"),
        (1234.5, "USD", "$1,234"),
        (0.25, "s", "250 ms"),
        (2.5, "s", "2.50 s"),
        (0.125, "ratio", "12.5 %"),
        (12.0, "", "12"),
        (None, "USD", "–"),
        (1500.4, "tokens/s", "1.5k tok/s"),
    ],
)
def test_numbers_carry_their_units(value: float | None, unit: str, shown: str) -> None:
    assert ui.fmt(value, unit) == shown


def test_units_come_from_metric_names() -> None:
    assert [ui.unit_of(m) for m in ("cost_per_success_usd", "ttft_p95", "error_rate", "tokens_per_s", "runs")] == [
        "USD",
        "s",
        "ratio",
        "tokens/s",
        "",
    ]


def test_collector_and_dashboard_read_a_shared_variable_alike(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``AGENTWATCH_GPU_HOUR_USD`` is read by both: the same value, the same complaint (the collector refuses, the dashboard logs)."""
    monkeypatch.setenv("AGENTWATCH_GPU_HOUR_USD", " 2.5")
    assert Settings.from_env().gpu_hour_usd == DashboardConfig.from_env().gpu_hour_usd == 2.5
    monkeypatch.setenv("AGENTWATCH_GPU_HOUR_USD", "cheap")
    with pytest.raises(ValueError, match="AGENTWATCH_GPU_HOUR_USD='cheap': expected a number"):
        Settings.from_env()
    with caplog.at_level(logging.WARNING):
        assert DashboardConfig.from_env().gpu_hour_usd == 0.0
    assert "AGENTWATCH_GPU_HOUR_USD='cheap': expected a number" in caplog.text


def test_the_server_imports_what_a_first_visit_needs_before_it_serves() -> None:
    """httpcore (with trio) was imported when the first visitor's sidebar built its first client,
    and Streamlit's REPL check walked the first page's frames: both move to start-up."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from agentwatch_platform.dashboard import server\n"
        "server.preload()\n"
        "from streamlit import delta_generator\n"
        "from agentwatch_api.client import CollectorClient, tls_context\n"
        "a, b = CollectorClient('http://127.0.0.1:1'), CollectorClient('https://127.0.0.1:2')\n"
        "print('httpcore' in sys.modules, delta_generator._use_warning_has_been_displayed,"
        " tls_context() is tls_context())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "True", "True"]
