"""What a person reads about an incident: its one-line message and the details a channel adds.

A notification is read by someone on call, in Slack, an e-mail or a log line, often without the
dashboard at hand; it names each figure in words and shows it in its unit ("tool failure rate =
32.5 %", "cost = $41.20"), never by the rule's metric identifier (``tool_failure_rate = 0.325``).
The words and units are ``agentwatch_api.labels``', the same the dashboard shows. The webhook's JSON
keeps the identifiers (``alert.metric``) for machines, beside the same message.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from agentwatch_api.labels import figure, metric_label
from agentwatch_platform.alerts.model import Alert, Event, Notification

if TYPE_CHECKING:  # rules imports the channels, which import this module
    from agentwatch_platform.alerts.detectors import Verdict
    from agentwatch_platform.alerts.rules import Rule


def duration(seconds: float) -> str:
    """Whole units as a person says them: "3 min 31 s" (a 211 s incident read "4 min"), "2 h 5 min"."""
    whole = round(seconds)
    if whole < 120:
        return f"{whole} s"
    for big, big_unit, small, small_unit in ((86_400, "d", 3600, "h"), (3600, "h", 60, "min"), (60, "min", 1, "s")):
        if whole >= big:
            first, rest = divmod(whole, big)
            return f"{first} {big_unit}" + (f" {rest // small} {small_unit}" if rest // small else "")
    return f"{whole} s"


def message(rule: Rule, alert: Alert, verdict: Verdict, event: Event) -> str:
    """One line a person can act on: what, where, how far from usual, since when."""
    where = f" [{', '.join(f'{k}={v}' for k, v in sorted(alert.scope.items()))}]" if alert.scope else ""
    since = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(alert.started_at))
    said, metric = metric_label(rule.metric), rule.metric
    if event == "resolved":
        lasted = duration((alert.resolved_at or alert.started_at) - alert.started_at)
        return f"{rule.name}{where}: resolved after {lasted} (since {since}), peak {figure(metric, alert.peak)}, {said} now {figure(metric, verdict.value)}"
    if event == "no_data":
        return f"{rule.name}{where}: no data for {said} (firing since {since}, peak {figure(metric, alert.peak)}); the incident stays open"
    figures = [f"baseline {figure(metric, alert.baseline)}"] if alert.baseline is not None else []
    if alert.threshold is not None:
        figures.append(
            f"{'above' if rule.condition.direction == 'above' else 'below'} {figure(metric, alert.threshold)} fires"
        )
    if alert.last_notified_at is not None and verdict.threshold is not None and verdict.threshold != alert.threshold:
        figures.append(f"resolves past {figure(metric, verdict.threshold)}")
    return f"{rule.name}{where}: {said} = {figure(metric, alert.value)} ({', '.join(figures)}; peak {figure(metric, alert.peak)}, since {since})"


def details(notification: Notification) -> str:
    """The human text of a notification (Slack, e-mail): message, figures, scope, times and links."""
    alert = notification.alert
    lines = [alert.message]
    if notification.description:
        lines.append(notification.description)
    named = (("value", alert.value), ("baseline", alert.baseline), ("threshold", alert.threshold), ("peak", alert.peak))
    figures = [f"{name} {figure(alert.metric, value)}" for name, value in named if value is not None]
    if figures:
        lines.append(f"{metric_label(alert.metric)}: {', '.join(figures)}")
    lines.append("scope: " + (", ".join(f"{k}={v}" for k, v in sorted(alert.scope.items())) or "whole project"))
    lines.append(f"incident started {_when(alert.started_at)}")
    if alert.resolved_at is not None:
        lines.append(f"resolved {_when(alert.resolved_at)}")
    if alert.no_data_since is not None:
        lines.append(f"no data since {_when(alert.no_data_since)}")
    if notification.runs_link:
        lines.append(f"its most expensive run: {notification.runs_link}")
    if notification.link:
        lines.append(f"the incident and its runs: {notification.link}")
    lines.append(f"fingerprint {alert.fingerprint}, alert {alert.alert_id}")
    return "\n".join(lines)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t))
