"""Alerts: incidents (one per rule and scope, from firing to resolved) with their evidence: the
metric against its baseline and threshold with the incident shaded, and the most expensive runs
of the incident's window; firing, resolved and no-data counts; the rules in force.

``?alert=<id>`` (the link in every notification) opens that incident."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import TIMESERIES_METRICS, AlertOut, AlertRuleOut, RunsPage, TimeSeries
from agentwatch_platform.dashboard import run_table, svg_charts, ui

CONTEXT_WINDOWS = 12  # windows of the metric shown before an incident
TOP_RUNS = 5


def render() -> None:
    st.title("Alerts")
    win = ui.window()
    rules: dict[str, AlertRuleOut] = {}
    with ui.guarded("the alert rules"):
        rules = {r.name: r for r in ui.fetch(Api.alert_rules)}
    with ui.guarded("the alerts"):
        firing: list[AlertOut] = ui.fetch(Api.alerts, state="firing")
        history: list[AlertOut] = ui.fetch(Api.alerts, start=win.start, end=win.end)
        resolved = [a for a in history if a.state == "resolved"]
        c = st.columns(3)
        c[0].metric("Firing now", len(firing))
        c[1].metric(f"Resolved, {win.label.lower()}", len(resolved))
        c[2].metric("No data now", sum(a.no_data_since is not None for a in firing))
        focus = st.query_params.get("alert", "")
        history = _with_focus(history, firing, focus)
        st.subheader("Firing")
        if firing:
            for alert in firing:
                _incident(alert, rules.get(alert.rule), expanded=not focus or focus == alert.alert_id)
        else:
            st.success("No alert is firing.")
        st.subheader(f"Incidents, {win.label.lower()}")
        _history(history, rules, focus, {a.alert_id for a in firing})
    with ui.guarded("the alert rules"):
        _rules(list(rules.values()))


def _with_focus(history: list[AlertOut], firing: list[AlertOut], focus: str) -> list[AlertOut]:
    """The range's incidents, plus the one a link names when it lies outside the range (a
    notification read days later still opens its incident, not another)."""
    if not focus or any(a.alert_id == focus for a in [*firing, *history]):
        return history
    named: list[AlertOut] = ui.fetch(Api.alerts, alert_id=focus)
    if not named:
        st.warning(f"No incident {focus} in this project (deleted, or of another project).")
        return history
    st.caption(
        f"Incident {focus} started {ui.fmt_time(named[0].started_at)}, before the range shown: it is listed with it."
    )
    return [*named, *history]


def _history(history: list[AlertOut], rules: dict[str, AlertRuleOut], focus: str, firing: set[str]) -> None:
    if not history:
        st.caption("No incident in this range.")
        return
    st.dataframe(incidents_frame(history), hide_index=True)
    done = [a for a in history if a.alert_id not in firing]
    if not done:
        return
    labels = {a.alert_id: f"{a.rule} {_scope(a)} · {ui.fmt_time(a.started_at)}" for a in done}
    ids = list(labels)
    chosen = st.selectbox(
        "Show incident",
        ids,
        index=ids.index(focus) if focus in ids else 0,
        format_func=labels.__getitem__,
        key="alerts_incident",
    )
    alert = next(a for a in done if a.alert_id == chosen)
    _incident(alert, rules.get(alert.rule), expanded=True)


def _said(alert: AlertOut) -> str:
    """The incident in words and units (its message, written for logs, names the metric as the rules do)."""
    unit = ui.unit_of(alert.metric)
    label = ui.metric_label(alert.metric)
    figures = [f"peak {ui.fmt(alert.peak, unit)}"] if alert.peak is not None else []
    figures += [f"baseline {ui.fmt(alert.baseline, unit)}"] if alert.baseline is not None else []
    lasted = f", lasted {_fmt_duration(_duration(alert))}" if alert.resolved_at is not None else ""
    return f"{label} " + ", ".join(figures) + lasted


def _scope(alert: AlertOut) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(alert.scope.items())) or "whole project"


def _duration(alert: AlertOut, now: float | None = None) -> float | None:
    end = alert.resolved_at if alert.resolved_at is not None else now
    return None if end is None else max(end - alert.started_at, 0.0)


def _fmt_duration(seconds: float | None) -> str:
    """Whole seconds as a person says them: a 211 s incident "3 min 31 s" (it read "4 min")."""
    if seconds is None:
        return ui.BLANK
    return ui.fmt(float(round(seconds)), "s") if seconds >= 1 else ui.fmt(seconds, "s")


def _incident(alert: AlertOut, rule: AlertRuleOut | None, *, expanded: bool) -> None:
    unit = ui.unit_of(alert.metric)
    state = "no data" if alert.no_data_since is not None and alert.state == "firing" else alert.state
    with st.expander(f"[{alert.severity}] {alert.rule} · {_scope(alert)} · {state}: {_said(alert)}", expanded=expanded):
        c = st.columns([1, 1, 1, 1, 2])
        change = (alert.value - alert.baseline) / alert.baseline if alert.value is not None and alert.baseline else None
        shown = ui.fmt_change(change)
        c[0].metric(
            f"{ui.metric_label(alert.metric).capitalize()} now",
            ui.fmt(alert.value, unit),
            delta=shown.replace("previous", "baseline") if shown is not None else None,
            delta_color="inverse",
        )
        c[1].metric("Baseline", ui.fmt(alert.baseline, unit))
        c[2].metric("Threshold", ui.fmt(alert.threshold, unit))
        c[3].metric("Peak", ui.fmt(alert.peak, unit))
        ended = (
            f"resolved {ui.fmt_time(alert.resolved_at)} after {_fmt_duration(_duration(alert))}"
            if alert.resolved_at is not None
            else "still firing"
        )
        no_data = (
            f"  \nNo data since {ui.fmt_time(alert.no_data_since)}: missing data never resolves an incident"
            if alert.no_data_since is not None
            else ""
        )
        c[4].markdown(
            f"Scope: **{_scope(alert)}**  \nStarted {ui.fmt_time(alert.started_at)}, {ended}  \nLast notified {ui.fmt_time(alert.last_notified_at)}{no_data}"
        )
        step = rule.window_s if rule is not None else 60
        start, end = _span(alert, step)
        with ui.guarded(f"the {alert.metric} series"):
            series = _series(alert, start, end, step)
            if series is None:
                st.caption(
                    f"{ui.metric_label(alert.metric).capitalize()} is a figure of the moment (no series): its value, threshold and peak are above."
                )
            else:
                st.html(svg_charts.html_block([incident_chart(series, alert, unit)]))
        with ui.guarded("the incident's runs"):
            page: RunsPage = ui.fetch(
                Api.runs,
                start=start + (CONTEXT_WINDOWS - 1) * step,
                end=end,
                sort="-cost_usd",
                limit=TOP_RUNS,
                **run_filters(alert),
            )
            if page.items:
                st.caption(
                    (f"The {len(page.items)} most expensive runs" if len(page.items) > 1 else "The only run")
                    + " of the incident's window (open one for its steps):"
                )
                run_table.runs_table(
                    page.items,
                    key=f"alert-runs-{alert.alert_id}",
                    columns=["time", "agent", "status", "cost", "steps", "tool_failures", "tokens", "user", "models"],
                )
            else:
                st.caption("No run started in the incident's window.")


def run_filters(alert: AlertOut) -> dict[str, Any]:
    """``/api/runs`` filters of an incident's scope (agent, model, user id, session id, version)."""
    names = {"agent": "agent", "model": "model", "user": "user_id", "session": "session_id", "version": "version"}
    return {names[k]: v for k, v in alert.scope.items() if k in names}


def _series(alert: AlertOut, start: float, end: float, step: int) -> TimeSeries | None:
    """The incident's metric over its window, in its scope; None for a figure of the moment
    (the budget, run-state and version-change metrics have no series). Per user, session or
    version (a per-run metric) the series is whole runs' (``/api/alerts/scope-series``)."""
    per_run = ("user", "session") if alert.metric.startswith("version_") else ("user", "session", "version")
    key = next((k for k in per_run if k in alert.scope), None)
    if key is not None:
        series: TimeSeries = ui.fetch(
            Api.alert_scope_series,
            metric=alert.metric,
            start=start,
            end=end,
            step_s=step,
            group_by=key,
            agent=alert.scope.get("agent"),
        )
        return series.model_copy(update={"points": [p for p in series.points if p.group == alert.scope[key]]})
    if alert.metric not in TIMESERIES_METRICS:
        return None
    filters = {k: v for k, v in alert.scope.items() if k in ("agent", "model")}
    return ui.fetch(Api.timeseries, metric=alert.metric, start=start, end=end, step_s=step, **filters)


def _span(alert: AlertOut, step: int) -> tuple[float, float]:
    """The incident's window with ``CONTEXT_WINDOWS`` windows before it and two after, on bucket bounds."""
    start = (alert.started_at // step - CONTEXT_WINDOWS) * step
    end_at = alert.resolved_at if alert.resolved_at is not None else ui.window().end
    return float(start), float((end_at // step + 2) * step)


def incident_chart(series: TimeSeries, alert: AlertOut, unit: str) -> str:
    """The metric over time, its baseline and threshold, and the incident shaded."""
    end = (
        alert.resolved_at
        if alert.resolved_at is not None
        else (series.points[-1].t + series.step_s if series.points else alert.started_at)
    )
    levels = [
        (name, value)
        for name, value in (("baseline", alert.baseline), ("threshold", alert.threshold))
        if value is not None
    ]
    return svg_charts.time_chart(
        svg_charts.from_series([series]),
        f"{ui.metric_label(alert.metric).capitalize()}: the incident against its baseline",
        unit,
        ui.fmt,
        score=alert.metric == "feedback_score",
        band=(alert.started_at, end),
        levels=levels,
        width=1100,
        partial_from=ui.partial_from([series]),  # the newest buckets still filling: never drawn as a drop
    )


def incidents_frame(alerts: list[AlertOut]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "rule": a.rule,
                "severity": a.severity,
                "scope": _scope(a),
                "state": "no data" if a.no_data_since is not None and a.state == "firing" else a.state,
                "started": ui.fmt_time(a.started_at),
                "ended": ui.fmt_time(a.resolved_at),
                "duration": _fmt_duration(_duration(a)),
                "peak": ui.fmt(a.peak, ui.unit_of(a.metric)),
                "baseline": ui.fmt(a.baseline, ui.unit_of(a.metric)),
                "threshold": ui.fmt(a.threshold, ui.unit_of(a.metric)),
                "metric": ui.metric_label(a.metric),
            }
            for a in alerts
        ]
    )


def _rules(rules: list[AlertRuleOut]) -> None:
    st.subheader("Rules in force")
    if not rules:
        ui.empty(
            "No alert rules are loaded.",
            "Configure them in a YAML file named by `AGENTWATCH_ALERT_RULES` (`agentwatch alerts check FILE` validates it).",
        )
        return
    st.table(
        pd.DataFrame(
            [
                {  # a few rows: a plain HTML table, readable and searchable in the page
                    "name": r.name,
                    "metric": ui.metric_label(r.metric),
                    "scope": ", ".join(f"{k}={v}" for k, v in r.scope.items()) or "project",
                    "window": f"{r.window_s} s",
                    "condition": ", ".join(f"{k} {v}" for k, v in r.condition.items()),
                    "severity": r.severity,
                    "channels": ", ".join(r.channels),
                    "lifecycle": _lifecycle(r),
                }
                for r in rules
            ]
        ).set_index("name")
    )


def _lifecycle(rule: AlertRuleOut) -> str:
    parts = [f"for {rule.for_s} s"] if rule.for_s else []
    parts.append(f"resolves after {rule.resolve_after} clear window{'s' if rule.resolve_after != 1 else ''}")
    parts += [f"held {rule.keep_firing_for_s} s"] if rule.keep_firing_for_s else []
    parts.append(f"repeats every {rule.cooldown_s} s" if rule.cooldown_s else "no repeats")
    parts += ["notifies no data"] if rule.no_data == "notify" else []
    parts += [f"top {rule.top_k} scopes now"] if rule.top_k else []
    return ", ".join(parts)


render()
