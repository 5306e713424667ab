"""Alerts: firing and resolved alerts with their evidence (metric against baseline), and the rules."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from collector.api.schemas import AlertOut, AlertRuleOut
from dashboard import charts, ui


def render() -> None:
    st.title("Alerts")
    win = ui.window()
    with ui.guarded("the alerts"):
        firing: list[AlertOut] = ui.fetch("alerts", state="firing")
        resolved: list[AlertOut] = ui.fetch("alerts", state="resolved", start=win.start, end=win.end)
        c = st.columns(2)
        c[0].metric("Firing now", len(firing))
        c[1].metric(f"Resolved, {win.label.lower()}", len(resolved))
        st.subheader("Firing")
        if firing:
            for alert in firing:
                _evidence(alert)
        else:
            st.success("No alert is firing.")
        st.subheader("Resolved")
        if resolved:
            st.dataframe(alerts_frame(resolved), hide_index=True)
        else:
            st.caption("No alert resolved in this range.")
    with ui.guarded("the alert rules"):
        _rules(ui.fetch("alert_rules"))


def _evidence(alert: AlertOut) -> None:
    unit = ui.unit_of(alert.metric)
    with st.expander(f"[{alert.severity}] {alert.rule}: {alert.message}", expanded=True):
        c = st.columns([1, 1, 1, 2])
        change = (alert.value - alert.baseline) / alert.baseline if alert.value is not None and alert.baseline else None
        c[0].metric(f"{alert.metric} now", ui.fmt(alert.value, unit), delta=ui.fmt_change(change).replace("previous", "baseline") if change is not None else None, delta_color="inverse")
        c[1].metric("Baseline", ui.fmt(alert.baseline, unit))
        c[2].metric("Threshold", ui.fmt(alert.threshold, unit))
        scope = ", ".join(f"{k}={v}" for k, v in alert.scope.items()) or "whole project"
        c[3].markdown(f"Scope: **{scope}**  \nFiring since {ui.fmt_time(alert.started_at)}  \nLast notified {ui.fmt_time(alert.last_notified_at)}")
        bars = [(k, v) for k, v in (("value", alert.value), ("baseline", alert.baseline), ("threshold", alert.threshold)) if v is not None]
        if bars:
            st.plotly_chart(charts.bar_figure([k for k, _ in bars], [v for _, v in bars], f"{alert.metric}: value against baseline", unit), key=f"alert-{alert.alert_id}")


def alerts_frame(alerts: list[AlertOut]) -> pd.DataFrame:
    return pd.DataFrame([{
        "rule": a.rule, "severity": a.severity, "metric": a.metric, "scope": ", ".join(f"{k}={v}" for k, v in a.scope.items()),
        "value": ui.fmt(a.value, ui.unit_of(a.metric)), "baseline": ui.fmt(a.baseline, ui.unit_of(a.metric)),
        "threshold": ui.fmt(a.threshold, ui.unit_of(a.metric)), "started": ui.fmt_time(a.started_at), "resolved": ui.fmt_time(a.resolved_at),
        "message": a.message,
    } for a in alerts])


def _rules(rules: list[AlertRuleOut]) -> None:
    st.subheader("Rules in force")
    if not rules:
        ui.empty("No alert rules are loaded.", "Configure them in a YAML file named by `AGENTWATCH_ALERT_RULES` (`agentwatch alerts check FILE` validates it).")
        return
    st.table(pd.DataFrame([{  # a few rows: a plain HTML table, readable and searchable in the page
        "name": r.name, "metric": r.metric, "scope": ", ".join(f"{k}={v}" for k, v in r.scope.items()) or "project",
        "window": f"{r.window_s} s", "condition": ", ".join(f"{k} {v}" for k, v in r.condition.items()), "severity": r.severity,
        "channels": ", ".join(r.channels), "cool-down": f"{r.cooldown_s} s",
    } for r in rules]).set_index("name"))


render()
