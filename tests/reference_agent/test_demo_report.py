"""The demo's closing report names each alert's metric in words and its figures in their unit."""

from __future__ import annotations

from agentwatch_api.schemas import AlertOut
from agentwatch_platform.reference_agent.demo import DemoReport, _print_report


def _alert(metric: str, peak: float, baseline: float | None) -> AlertOut:
    return AlertOut(
        alert_id="a1",
        fingerprint="fp1",
        rule="demo-cost-spike",
        severity="critical",
        state="resolved",
        scope={"agent": "researcher"},
        metric=metric,
        value=peak,
        baseline=baseline,
        threshold=None,
        peak=peak,
        message="",
        started_at=1_800_000_000.0,
        resolved_at=1_800_000_211.0,
    )


def test_the_report_says_each_alert_in_words() -> None:
    lines: list[str] = []
    alerts = [_alert("cost_usd", 64.15, 3.2), _alert("version_cost_per_run_change", 5.788, None)]
    _print_report(DemoReport(runs_recorded=3, alerts=alerts), lines.append)
    assert lines[-2].endswith("cost peak $64.15 against a baseline of $3.2, resolved after 211 s")
    assert lines[-1].endswith("change in cost per run from the previous version peak 578.8 %, resolved after 211 s")
