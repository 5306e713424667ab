"""The scheduled evaluator: rules over metrics, one incident at a time per (rule, scope), notifications.

Each (project, rule, scope) has a fingerprint, and at most one open *incident* (an ``Alert``
row). Its lifecycle, the way an on-call engineer expects a pager to behave:

- *pending*: the condition holds, but not yet for the rule's ``for`` (kept in memory);
- *firing*: the incident opened (``firing``, notified once on every channel of the rule). It
  stays firing while the condition holds, judged with the detector's lower resolve bound
  (hysteresis: ``z_resolve``, a relaxed ``min_ratio``/``min_delta``), and re-notifies
  (``repeat``) only every ``repeat_interval`` (``cooldown``; 0 = never);
- *clearing*: the condition no longer holds; the incident resolves once ``resolve_after``
  windows in a row were clear **and** ``keep_firing_for`` has passed since the condition last
  held (the hold-down), then notifies ``resolved`` once. A breach while clearing resets both.
  The incident's ``resolved_at`` is when it ended, not when that was confirmed: the evaluation
  that saw the first of those clear windows (or the hold-down's end), so its recorded duration
  is the spike's; the ``resolved`` notice itself goes out ``resolve_after`` windows later;
- *no data*: the metric of a firing incident has no value (the scope vanished, a bucket with
  fewer than ``min_runs`` runs): the incident stays firing and is marked ``no_data_since``;
  missing data never resolves it. With ``no_data: notify`` one ``no_data`` message goes out.

While an incident is open the anomaly detector does not learn from it: the incident's buckets
are hidden from the baseline's history, so a three-hour spike is still judged against the
level before it rather than becoming "normal". Only once the incident is older than the
detector's ``relearn_after`` windows does the detector see them, and a lasting step becomes
the new normal (and resolves) as the detector documents.

A rule whose data cannot be read is skipped for this round and changes nothing (unknown is
not resolved). State changes are rows in ClickHouse (``alerts``); firing incidents are reloaded
from there on start, so a restart neither re-notifies nor forgets to resolve, and a
notification that no attempt delivered before the restart (a ``firing`` or ``resolved``
without a successful ``alert_deliveries`` row for its channel) is sent again, once, when the
process that recorded it can no longer be trying it (``alerts.redelivery``).
Notifications go to the ``Dispatcher``, which delivers in the background: evaluation never
waits on a channel. A restart forgets only what lives in memory: a pending condition starts
its ``for`` again, and the count of clear windows starts again (resolution may come up to
``resolve_after`` windows later).

Scopes: ``"*"`` for agent, model, user, session or version makes one incident per value (per
user, session or version the series come from ``alerts.run_scopes``; a named version on a
per-run metric is read per version and that version's group judged); a rule's ``top_k`` judges only the k
scopes with the highest value now plus every scope with an open incident. Figures of the
moment (``alerts.budget``, ``alerts.run_states``) are judged by their threshold alone, with the
same lifecycle.

Buckets: a rule with ``window: 1h`` reads buckets of one hour aligned to the epoch. The
last *complete* bucket is judged; for additive or maximum metrics with an ``above`` condition
the current *partial* bucket is judged too (a partial sum or max only grows), so a spike can
fire before its hour is over. Complete is what the collector's watermark says (spans of a
bucket that has ended may still be arriving); where it trails by more than the window, the
newest complete bucket is judged, as late as the lag. Resolution counts complete buckets.
Buckets before a scope's first figure are no history; for a ``below`` rule on a sum, a scope
with figures in the day before the range counts its empty buckets as zero (silence is judged).
A rule is read at most every sixth of its window (``RUNS_PER_WINDOW``), however short the
evaluation interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from agentwatch_api.schemas import TimeSeries
from agentwatch_platform.alerts.channels import Dispatcher
from agentwatch_platform.alerts.detectors import Verdict
from agentwatch_platform.alerts.errors import AlertsError, RoleLost
from agentwatch_platform.alerts.model import Alert, Event, Notification
from agentwatch_platform.alerts.redelivery import Redelivery
from agentwatch_platform.alerts.rules import DERIVED_METRICS, Rule, RulesConfig, load_rules
from agentwatch_platform.alerts.run_scopes import top_k
from agentwatch_platform.alerts.run_states import RUN_STATE_METRICS, absent_value
from agentwatch_platform.alerts.settings import AlertsSettings
from agentwatch_platform.alerts.sources import AlertHistory, FigureQuery, MetricSource, SeriesQuery, StoreBackend
from agentwatch_platform.alerts.version_rules import EVERY_S, VERSION_METRICS
from agentwatch_platform.alerts.wording import message
from agentwatch_platform.collector.query.ranges import MAX_BUCKETS
from agentwatch_platform.collector.state import collector_state

log = logging.getLogger("agentwatch.alerts")

# How far back a group's figures make its silence count (``Evaluator._lately_active``).
SILENCE_LOOKBACK_S = 86_400
# Metrics whose partial bucket can only grow towards the complete value.
MONOTONE = frozenset(
    {"runs", "cost_usd", "input_tokens", "output_tokens", "tool_calls", "max_run_cost_usd", "max_steps"}
)
ADDITIVE = frozenset({"runs", "cost_usd", "input_tokens", "output_tokens", "tokens_per_s", "tool_calls"})

RUNS_PER_WINDOW = 6
Observation = tuple[dict[str, str], Verdict]


def fingerprint(project: str, rule: str, scope: dict[str, str]) -> str:
    """Stable identity of what an alert is about; the same across restarts and processes."""
    return hashlib.sha256(json.dumps([project, rule, sorted(scope.items())]).encode()).hexdigest()[:16]


class Evaluator:
    """Evaluates every rule for every project; ``run_once`` is one round (thread-safe to call in turn)."""

    def __init__(
        self,
        config: RulesConfig,
        source: MetricSource,
        history: AlertHistory,
        dispatcher: Dispatcher,
        *,
        clock: Callable[[], float] = time.time,
        role_held: Callable[[], bool] = lambda: True,
    ) -> None:
        self.config, self.source, self.history, self.dispatcher, self.clock = config, source, history, dispatcher, clock
        self.role_held = role_held  # asked before every state recorded (``_save``)
        self._active: dict[str, dict[str, Alert]] = {}  # project -> fingerprint -> firing alert
        self._last_run: dict[tuple[str, str], float] = {}  # (project, rule) -> last evaluation
        self._pending: dict[str, float] = {}  # fingerprint -> since when the condition holds (``for``)
        self._clear: dict[
            str, tuple[int, int, float]
        ] = {}  # fingerprint -> (last window counted, clear windows in a row, since)
        self._redelivery = Redelivery(history, dispatcher, self._channels_of)
        self.errors = 0
        self.rounds = 0

    def run_once(self, now: float | None = None) -> list[tuple[Event, Alert]]:
        """One evaluation round; returns the notifications it sent (event, alert snapshot). Without
        the alerts role (``role_held``) nothing is evaluated and memory is forgotten: the holder in
        between may resolve, open or deliver, and on taking the role back this evaluator reads that
        from the history instead of going on from what it held before."""
        if not self.role_held():
            self._forget_all()
            return []
        now = self.clock() if now is None else now
        sent: list[tuple[Event, Alert]] = []
        try:
            projects = self.source.projects(now)
        except AlertsError as exc:
            self._error("listing projects", exc)
            return sent
        try:
            for project in projects:
                sent += self._project(project, now)
        except RoleLost:
            self._forget_all()
            log.info("alerts: the alerts role was lost during a round; its changes are left to the holder")
            return sent
        self.rounds += 1
        return sent

    def _forget_all(self) -> None:
        """Drop what this evaluator holds in memory: if it holds the role again, the firing alerts
        it reads are those the holder in between recorded."""
        self._active.clear()
        self._redelivery.forget()
        self._pending.clear()
        self._clear.clear()
        self._last_run.clear()

    def _rule(self, name: str) -> Rule | None:
        return next((rule for rule in self.config.rules if rule.name == name), None)

    def _channels_of(self, rule_name: str) -> tuple[str, ...] | None:
        rule = self._rule(rule_name)
        return None if rule is None else tuple(rule.channels)

    def _error(self, what: str, exc: Exception) -> None:
        self.errors += 1
        log.warning("alerts: %s failed, skipped this round: %s", what, exc)

    def _project(self, project: str, now: float) -> list[tuple[Event, Alert]]:
        active = self._load(project, now)
        if active is None:
            return []
        sent: list[tuple[Event, Alert]] = []
        for rule in self.config.rules:
            if rule.scope.get("project", project) != project or not self._due(rule, project, now):
                continue
            try:
                observations = self._observe(rule, project, now, active)
            except AlertsError as exc:
                self._error(f"rule {rule.name} on project {project}", exc)
                continue
            for scope, verdict in observations:
                sent += self._step(rule, project, scope, verdict, active, now)
        self._retire_orphans(project, active, now)
        return sent

    def _retire_orphans(self, project: str, active: dict[str, Alert], now: float) -> None:
        """Alerts of rules no longer in the rules file resolve quietly (their channels are gone)."""
        names = {rule.name for rule in self.config.rules}
        for fp, alert in list(active.items()):
            if alert.rule in names:
                continue
            del active[fp]
            alert.state, alert.resolved_at = "resolved", now
            alert.message = f"{alert.rule}: resolved, the rule is no longer configured"
            log.info("alert %s of project %s resolved: its rule is gone", alert.rule, project)
            self._save(alert, now)

    def _due(self, rule: Rule, project: str, now: float) -> bool:
        """A rule is read at most every sixth of its window (a 1 h rule every 10 min): its
        value changes by the bucket, and the collector's store is not queried for nothing."""
        last = self._last_run.get((project, rule.name))
        every = rule.window_s / RUNS_PER_WINDOW
        if rule.metric in VERSION_METRICS:  # a comparison over days: a release shows within minutes
            every = min(every, EVERY_S)
        if last is not None and 0 <= now - last < every:
            return False
        self._last_run[(project, rule.name)] = now
        return True

    def forget_project(self, project: str) -> None:
        """The next round reads ``project``'s firing alerts from the history again (after a deletion)."""
        self._active.pop(project, None)

    def _load(self, project: str, now: float) -> dict[str, Alert] | None:
        """Firing alerts of a project, from the history the first time it is seen."""
        loaded = project not in self._active
        if loaded:
            try:
                self._active[project] = {a.fingerprint: a for a in self.history.firing(project)}
            except AlertsError as exc:
                self._error(f"loading firing alerts of {project}", exc)
                return None
        self._redeliver(project, now, loaded=loaded)
        return self._active[project]

    def _redeliver(self, project: str, now: float, *, loaded: bool) -> None:
        """Send again what an earlier process recorded but never delivered, once it has settled
        (``alerts.redelivery``)."""
        try:
            resends = self._redelivery.due(project, now, loaded=loaded)
        except AlertsError as exc:
            self._error(f"reading undelivered notifications of {project}", exc)
            return
        for resend in resends:
            rule = self._rule(resend.alert.rule)
            if rule is None:  # its rule went between the look-up and now (rules reloaded)
                continue
            log.info(
                "alert %s: re-sending %s on %s (recorded, not delivered, by an earlier process)",
                rule.name,
                resend.event,
                ", ".join(resend.channels),
            )
            self.dispatcher.submit(self._notification(resend.event, rule, resend.alert, now), resend.channels)

    # --- observing -------------------------------------------------------------------------
    def _observe(self, rule: Rule, project: str, now: float, active: dict[str, Alert]) -> list[Observation]:
        """A verdict per scope (per agent or model), plus 'no data' for firing scopes that vanished."""
        filters = rule.filters()
        agent, model = filters.get("agent"), filters.get("model")
        if rule.metric in DERIVED_METRICS:
            value = self.source.month_cost(project, now, rule.window_s, agent, model).value(rule.metric)
            firing = fingerprint(project, rule.name, filters) in active
            observations = [(filters, rule.condition.detect([value], step_s=rule.window_s, firing=firing))]
        elif rule.metric in RUN_STATE_METRICS:
            figure = FigureQuery(rule.metric, now, rule.window_s, rule.group_by, agent, min_runs=rule.min_runs)
            values = self.source.run_states(project, figure)
            for alert in active.values():  # an agent with an open incident and no run for a day
                if alert.rule == rule.name:
                    values.setdefault(alert.scope.get(rule.group_by, ""), absent_value(rule.metric))
            observations = [
                self._judge_now(rule, project, group, value, active) for group, value in sorted(values.items())
            ]
        elif rule.metric in VERSION_METRICS:
            observations = self._observe_versions(rule, project, now, active, agent, filters.get("version"))
        else:
            observations = self._observe_series(rule, project, now, active, agent, model)
        seen = {fingerprint(project, rule.name, scope) for scope, _ in observations}
        for fp, alert in active.items():
            if alert.rule == rule.name and fp not in seen:
                observations.append((alert.scope, Verdict(False, False, None, reason="no data")))
        return observations

    def _observe_versions(
        self, rule: Rule, project: str, now: float, active: dict[str, Alert], agent: str | None, version: str | None
    ) -> list[Observation]:
        """The newest (or the named) version against the one before it; an open incident of an
        older version is judged clear once a newer version is the one compared (it moved on)."""
        figure = FigureQuery(rule.metric, now, rule.window_s, agent=agent, version=version, min_runs=rule.min_runs)
        values = self.source.version_changes(project, figure)
        if rule.group_by == "version":
            for alert in active.values():
                if alert.rule == rule.name:
                    values.setdefault(alert.scope.get("version", ""), 0.0)
        return [self._judge_now(rule, project, group, value, active) for group, value in sorted(values.items())]

    def _judge_now(
        self, rule: Rule, project: str, group: str, value: float | None, active: dict[str, Alert]
    ) -> Observation:
        """A figure of now (no history): the threshold, with the scope's firing state."""
        scope = {**rule.filters(), **({rule.group_by: group} if rule.group_by != "none" else {})}
        firing = fingerprint(project, rule.name, scope) in active
        return scope, rule.condition.detect([value], step_s=rule.window_s, firing=firing)

    def _observe_series(
        self, rule: Rule, project: str, now: float, active: dict[str, Alert], agent: str | None, model: str | None
    ) -> list[Observation]:
        step = rule.window_s
        current = math.floor(now / step) * step  # start of the partial bucket
        wanted = rule.condition.history_buckets(step) + 1 + _extra_history(rule, active)
        query = SeriesQuery(rule.metric, 0.0, max(now, current + 1e-3), step, rule.series_group_by, agent, model)
        query, series, settled = self._read_settled(project, query, current, wanted)
        start, by = query.start, query.group_by
        count = round((current - start) / step)
        silent = self._lately_active(project, query) if _counts_silence(rule) else frozenset()
        groups = {
            g: values[: settled + 1]
            for g, values in _by_group(series, start, step, count + 1, rule.metric in ADDITIVE, silent).items()
            if by == rule.group_by or g == rule.scope[by]  # a named version: its group only
        }
        if rule.min_runs:
            runs = _by_group(
                self.source.timeseries(project, dataclasses.replace(query, metric="runs")),
                start,
                step,
                settled + 1,
                True,
            )
            groups = {g: _enough_runs(values, runs.get(g, []), rule.min_runs) for g, values in groups.items()}
        if rule.top_k:
            groups = top_k(
                groups,
                rule.top_k,
                keep={a.scope.get(rule.group_by, "") for a in active.values() if a.rule == rule.name},
            )
        observations = []
        for group, values in groups.items():
            scope = {**rule.filters(), **({rule.group_by: group} if rule.group_by != "none" else {})}
            alert = active.get(fingerprint(project, rule.name, scope))
            hide = _incident_buckets(rule, alert, start, len(values)) if alert is not None else None
            observations.append((scope, self._judge(rule, values, alert is not None, hide)))
        return observations

    def _lately_active(self, project: str, query: SeriesQuery) -> frozenset[str]:
        """The groups with a non-zero figure in the day before ``query``'s range: where they have
        none in it, the rule sees zeros, not "no data" (``runs`` below 1 fires once an agent stops)."""
        day = dataclasses.replace(
            query, start=query.start - SILENCE_LOOKBACK_S, end=query.start, step_s=SILENCE_LOOKBACK_S
        )
        return frozenset(p.group for p in self.source.timeseries(project, day).points if p.value)

    def _read_settled(
        self, project: str, query: SeriesQuery, current: float, wanted: int
    ) -> tuple[SeriesQuery, TimeSeries, int]:
        """The series from ``wanted`` buckets before the one now filling, and how many of them are
        complete. Where the collector's watermark calls all of them partial (its arrival lag
        outlasts the window: runs whose spans come minutes after they start), it is read once more
        from as many buckets further back as the watermark trails, so the rule judges the newest
        complete bucket, that much later, instead of no bucket at all."""
        step = query.step_s
        query = dataclasses.replace(query, start=current - wanted * step)
        series = self.source.timeseries(project, query)
        settled = _settled(series, query.start, step, wanted)
        behind = min(_trailing(series, current), MAX_BUCKETS - 1 - wanted)
        if settled or behind <= 0:
            return query, series, settled
        query = dataclasses.replace(query, start=current - (wanted + behind) * step)
        series = self.source.timeseries(project, query)
        return query, series, _settled(series, query.start, step, wanted + behind)

    def _judge(self, rule: Rule, values: list[float | None], firing: bool, hide: int | None = None) -> Verdict:
        """The last complete bucket; for monotone 'above' rules also the partial one. History
        from index ``hide`` on (an open incident's buckets) is blanked: no learning the spike."""
        complete, partial = values[:-1], values[-1]
        hidden = 0 if hide is None else max(len(complete) - 1 - hide, 0)
        verdict = rule.condition.detect(_hidden(complete, hide), step_s=rule.window_s, firing=firing, hidden=hidden)
        if verdict.firing or partial is None or rule.metric not in MONOTONE or rule.condition.direction != "above":
            return verdict
        early = rule.condition.detect(
            _hidden(values[1:], None if hide is None else hide - 1),
            step_s=rule.window_s,
            firing=firing,
            hidden=hidden + 1,
        )
        return early if early.firing else verdict

    # --- the incident lifecycle -----------------------------------------------------------
    def _step(
        self, rule: Rule, project: str, scope: dict[str, str], verdict: Verdict, active: dict[str, Alert], now: float
    ) -> list[tuple[Event, Alert]]:
        fp = fingerprint(project, rule.name, scope)
        alert = active.get(fp)
        if alert is None:
            return self._open(rule, project, fp, scope, verdict, active, now)
        if not verdict.ready:
            return self._no_data(rule, alert, verdict, now)
        if verdict.firing:
            return self._hold(rule, fp, alert, verdict, now)
        return self._clearing(rule, fp, alert, verdict, active, now)

    def _open(
        self,
        rule: Rule,
        project: str,
        fp: str,
        scope: dict[str, str],
        verdict: Verdict,
        active: dict[str, Alert],
        now: float,
    ) -> list[tuple[Event, Alert]]:
        """Pending while the condition has held for less than ``for``; then a new incident."""
        if not verdict.firing:
            self._pending.pop(fp, None)
            return []
        since = self._pending.setdefault(fp, now)
        if now - since < rule.for_s:
            return []
        del self._pending[fp]
        alert = Alert(
            project=project,
            alert_id=_alert_id(fp, since),
            fingerprint=fp,
            rule=rule.name,
            severity=rule.severity,
            state="firing",
            scope=dict(scope),
            metric=rule.metric,
            value=None,
            baseline=None,
            threshold=None,
            message="",
            started_at=since,
        )
        alert.peak, alert.last_breach_at = verdict.value, now
        self._clear.pop(fp, None)
        active[fp] = alert
        return self._change(rule, alert, verdict, "firing", now)

    def _hold(self, rule: Rule, fp: str, alert: Alert, verdict: Verdict, now: float) -> list[tuple[Event, Alert]]:
        """Still breached (at the resolve bound): the incident goes on; repeat on the interval."""
        self._clear.pop(fp, None)
        alert.last_breach_at, alert.no_data_since = now, None
        alert.peak = _peak(alert.peak, verdict.value, rule.condition.direction)
        last = alert.last_notified_at if alert.last_notified_at is not None else alert.started_at
        if rule.repeat_interval_s > 0 and now - last >= rule.repeat_interval_s:
            return self._change(rule, alert, verdict, "repeat", now)
        _update(alert, verdict, rule)
        alert.message = message(rule, alert, verdict, "firing")
        self._save(alert, now)
        return []

    def _clearing(
        self, rule: Rule, fp: str, alert: Alert, verdict: Verdict, active: dict[str, Alert], now: float
    ) -> list[tuple[Event, Alert]]:
        """Clear: count windows in a row; resolve after ``resolve_after`` of them and the hold-down."""
        window = math.floor(now / rule.window_s)
        last, count, since = self._clear.get(fp, (window - 1, 0, now))
        count += window != last
        self._clear[fp] = (window, count, since)
        alert.no_data_since = None
        held = now - (alert.last_breach_at if alert.last_breach_at is not None else alert.started_at)
        if count < rule.resolve_after or held < rule.keep_firing_for_s:
            _update(alert, verdict, rule)
            alert.message = message(rule, alert, verdict, "firing")
            self._save(alert, now)
            return []
        del active[fp]
        self._clear.pop(fp, None)
        alert.state, alert.resolved_at = "resolved", _ended_at(rule, alert, since)
        return self._change(rule, alert, verdict, "resolved", now)

    def _no_data(self, rule: Rule, alert: Alert, verdict: Verdict, now: float) -> list[tuple[Event, Alert]]:
        """No value for a firing incident: shown (``no_data_since``), never resolved by it."""
        if alert.no_data_since is not None:
            return []
        alert.no_data_since = now
        if rule.no_data == "notify":
            return self._change(rule, alert, verdict, "no_data", now)
        alert.message = message(rule, alert, verdict, "no_data")
        self._save(alert, now)
        return []

    def _save(self, alert: Alert, now: float) -> None:
        """Record ``alert``'s new state; nothing, and the round ends, once this collector may no
        longer hold the alerts role (``role_held``): a round can outlast its lease on a starved
        machine, and a state written then could undo the next holder's, or go unnotified by it."""
        if not self.role_held():
            raise RoleLost
        alert.updated_at = max(now, alert.updated_at + 0.001)  # a strictly newer version
        try:
            self.history.save(alert.model_copy(update={"scope": dict(alert.scope)}))
        except AlertsError as exc:
            self._error(f"saving alert {alert.alert_id}", exc)

    def _change(
        self, rule: Rule, alert: Alert, verdict: Verdict, event: Event, now: float
    ) -> list[tuple[Event, Alert]]:
        """Record the new state, then hand the notification to the dispatcher (neither once the role
        may be lost: ``_save``)."""
        if event in ("firing", "repeat"):
            _update(alert, verdict, rule)
        alert.message = message(rule, alert, verdict, event)
        alert.last_notified_at = now
        self._save(alert, now)
        snapshot = alert.model_copy(update={"scope": dict(alert.scope)})
        self.dispatcher.submit(self._notification(event, rule, snapshot, now), rule.channels)
        self._redelivery.submitted(alert.project, alert.alert_id, event)
        log.info("alert %s %s: %s", event, rule.name, alert.message)
        return [(event, snapshot)]

    def _link(self, rule: Rule, alert: Alert, now: float) -> str:
        """The dashboard's Alerts page opened on this incident: its metric against the baseline
        over the incident's window and scope, and the runs of that window, most expensive first.
        It names the project (``?project=``): a dashboard session holding keys of several projects
        switches to the alert's."""
        if not self.config.dashboard_url:
            return ""
        return f"{self.config.dashboard_url}/alerts?{urllib.parse.urlencode(_window(rule, alert, now, alert=alert.alert_id))}"

    def _runs_link(self, rule: Rule, alert: Alert, now: float) -> str:
        """The dashboard's run page on the most expensive run of the incident's window and scope
        (``/run?costliest=1``: found when the link is opened, so a late run counts too)."""
        if not self.config.dashboard_url:
            return ""
        return f"{self.config.dashboard_url}/run?{urllib.parse.urlencode(_window(rule, alert, now, costliest=1))}"

    def _notification(self, event: Event, rule: Rule, alert: Alert, now: float) -> Notification:
        return Notification(
            event, alert, now, rule.description, self._link(rule, alert, now), self._runs_link(rule, alert, now)
        )


def _window(rule: Rule, incident: Alert, now: float, **first: object) -> dict[str, object]:
    """The incident's window (a bucket either side) and scope, as a link's query parameters."""
    onset = math.floor(incident.started_at / rule.window_s) * rule.window_s - rule.window_s
    end = (incident.resolved_at if incident.resolved_at is not None else now) + rule.window_s
    return {
        **first,
        "project": incident.project,
        "start": int(onset),
        "end": math.ceil(end),
        **{k: v for k, v in sorted(incident.scope.items()) if k != "project"},
    }


def _ended_at(rule: Rule, alert: Alert, clear_since: float) -> float:
    """When the incident ended: the evaluation that saw the first of the clear windows that
    resolved it (the ``resolved`` notice goes out ``resolve_after`` windows later, once they
    confirmed it), or the end of the hold-down when ``keep_firing_for`` held it longer."""
    last_breach = alert.last_breach_at if alert.last_breach_at is not None else alert.started_at
    return max(clear_since, last_breach + rule.keep_firing_for_s)


def _peak(peak: float | None, value: float | None, direction: str) -> float | None:
    if value is None or peak is None:
        return peak if value is None else value
    return max(peak, value) if direction == "above" else min(peak, value)


def _incident_buckets(rule: Rule, alert: Alert, start: float, count: int) -> int | None:
    """Index of the first bucket of ``alert``'s incident among ``count`` buckets from ``start``
    (the bucket before the one it fired in), or None once the detector may relearn from it."""
    step = rule.window_s
    onset = round((math.floor(alert.started_at / step) * step - step - start) / step)
    relearn = getattr(rule.condition, "relearn_after", None)
    if relearn is None or count - 1 - onset > relearn:
        return None
    return max(onset, 0)


def _extra_history(rule: Rule, active: dict[str, Alert]) -> int:
    """Buckets to read beyond the detector's history while the rule has an open incident: the
    incident's own buckets are hidden, so the baseline needs as many more from before it."""
    relearn = getattr(rule.condition, "relearn_after", None)
    if relearn is None or not any(alert.rule == rule.name for alert in active.values()):
        return 0
    return int(relearn) + 2


def _hidden(values: list[float | None], hide: int | None) -> list[float | None]:
    """``values`` with the history from ``hide`` on blanked; the last value (under test) kept."""
    if hide is None or hide >= len(values) - 1:
        return values
    return values[:hide] + [None] * (len(values) - 1 - hide) + values[-1:]


def _update(alert: Alert, verdict: Verdict, rule: Rule) -> None:
    """Carry the latest value and baseline; the threshold stays the one the incident fired on."""
    alert.value, alert.baseline = verdict.value, verdict.baseline if verdict.baseline is not None else alert.baseline
    if alert.threshold is None:
        alert.threshold = verdict.threshold
    alert.peak = _peak(alert.peak, verdict.value, rule.condition.direction)


def _enough_runs(values: list[float | None], runs: list[float | None], min_runs: int) -> list[float | None]:
    """``values`` with the buckets of fewer than ``min_runs`` runs blanked out."""
    return [v if i < len(runs) and (runs[i] or 0) >= min_runs else None for i, v in enumerate(values)]


def _alert_id(fp: str, started_at: float) -> str:
    return hashlib.sha256(f"{fp}:{started_at:.3f}".encode()).hexdigest()[:20]


def _settled(series: TimeSeries, start: float, step: int, count: int) -> int:
    """How many of the ``count`` buckets before the one now filling are complete: those that end
    by the collector's watermark (``complete_until``: spans of a bucket that has ended by the clock
    may still be arriving), or where a series carries none, those before the first point flagged
    partial. The buckets from there on are left out, the first of them judged as the partial one."""
    if series.complete_until is not None:  # a bucket without a point yet (no run) is partial too
        return max(0, min(count, math.floor((series.complete_until - start) / step)))
    partial = [round((p.t - start) / step) for p in series.points if getattr(p, "partial", False)]
    return min([count, *(i for i in partial if i >= 0)])


def _trailing(series: TimeSeries, current: float) -> int:
    """How many buckets that have ended by the clock (before ``current``) the watermark
    (``complete_until``) still calls partial; 0 where the series was cut by the clock alone."""
    until = series.complete_until
    return 0 if until is None or until >= current else math.ceil((current - until) / series.step_s)


def _counts_silence(rule: Rule) -> bool:
    """Whether an empty bucket is a zero to judge: a ``below`` rule on a sum (runs, cost)."""
    return rule.metric in ADDITIVE and rule.condition.direction == "below"


def _by_group(
    series: TimeSeries, start: float, step: int, count: int, additive: bool, active: frozenset[str] = frozenset()
) -> dict[str, list[float | None]]:
    """Dense per-group values for ``count`` buckets from ``start`` (missing additive -> 0). A group
    in ``active`` (lately active) is there, its silent buckets zero, even with no point in range."""
    empty: float | None = 0.0 if additive else None
    groups: dict[str, list[float | None]] = {group: [empty] * count for group in active}
    for point in series.points:
        index = round((point.t - start) / step)
        if 0 <= index < count:
            groups.setdefault(point.group, [empty] * count)[index] = point.value if point.value is not None else empty
    return {group: values if group in active else _from_first_data(values) for group, values in groups.items()}


def _from_first_data(values: list[float | None]) -> list[float | None]:
    """Buckets before a group's first non-zero value are no history, not a baseline of zero
    (an agent deployed an hour ago has one hour of history, not a week of zero cost)."""
    first = next((i for i, v in enumerate(values) if v), len(values))
    return [None] * first + values[first:]


# --- in the collector process ---------------------------------------------------------------
class InProcessAlerts:
    """The evaluator as a component with a lifetime, started by the collector's lifespan.

    Rules come from ``settings.alert_rules`` (``alerts.settings``; built-in defaults when empty);
    a bad rules file is logged with its line and key and alerts stay off, so ingestion never
    stops for it. Each round runs in a worker thread every ``settings.alert_interval_s`` seconds;
    a run is stuck once it has been idle ``idle_timeout_s`` (the collector's setting).
    """

    def __init__(
        self,
        store: Any,
        settings: AlertsSettings,
        *,
        idle_timeout_s: float,
        clock: Callable[[], float] = time.time,
        config: RulesConfig | None = None,
        lag: Callable[[], float] | None = None,
    ) -> None:
        self.store, self.settings, self.clock, self.lag = store, settings, clock, lag
        self.idle_timeout_s = idle_timeout_s
        self.config = config
        self.evaluator: Evaluator | None = None
        self._dispatcher: Dispatcher | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self.may_run: Callable[[], bool] = lambda: True

    async def __aenter__(self) -> InProcessAlerts:
        if self.config is None:
            try:
                self.config = load_rules(self.settings.alert_rules or None)
            except AlertsError as exc:
                log.error("alert rules not loaded, in-process alerts are off: %s", exc)
                return self
        backend = StoreBackend(self.store, idle_timeout_s=float(self.idle_timeout_s), lag=self.lag)
        held = lambda: self.may_run()  # noqa: E731 (may_run is set after construction: asked late)
        self._dispatcher = Dispatcher(
            self.config.channels, record=backend.record, policy=self.config.delivery, clock=self.clock, may_send=held
        )
        self.evaluator = Evaluator(self.config, backend, backend, self._dispatcher, clock=self.clock, role_held=held)
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="agentwatch-alerts")
        return self

    async def _loop(self) -> None:
        assert self.evaluator is not None and self._stop is not None
        while not self._stop.is_set():
            try:  # a round evaluates only while this collector holds the alerts role (collector.roles)
                await asyncio.to_thread(self.evaluator.run_once)
            except Exception:  # a bug in one round must not end the schedule
                log.exception("alert evaluation round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=float(self.settings.alert_interval_s))

    def forget_project(self, project: str) -> None:
        """Data of ``project`` was deleted (``POST /api/admin/delete``), its user's or session's alerts
        with it: the firing alerts held in memory are read again from the history at the next round,
        so an incident of a deleted user is not written back."""
        if self.evaluator is not None:
            self.evaluator.forget_project(project)

    async def __aexit__(self, *exc_info: object) -> None:
        """Stop after the round in progress: a round left running could reopen a closed store."""
        if self._task is not None and self._stop is not None:
            self._stop.set()
            await self._task
        if self._dispatcher is not None:
            await asyncio.to_thread(self._dispatcher.close)


def start_in_process(
    app: Any, settings: AlertsSettings, *, clock: Callable[[], float] | None = None
) -> InProcessAlerts:
    """The collector lifespan's hook: the component over the collector's store with the alerts'
    ``settings`` (the collector keeps it in ``collector_state(app).plugin_components["alerts"]``).

    ``clock``: the plugin's own (``alerts.plugin.AlertsPlugin``; tests drive time with it), else
    the collector's.
    """
    state = collector_state(app)
    freshness = state.freshness  # how far the collector's watermark trails now, once it has measured arrivals
    idle_timeout_s = state.settings.run_idle_timeout_s
    component = InProcessAlerts(
        state.store, settings, idle_timeout_s=idle_timeout_s, clock=clock or state.clock, lag=freshness.measured_lag
    )
    roles = state.roles
    if roles is not None:
        component.may_run = lambda: roles.holds("alerts")
    state.deletion_listeners.append(component.forget_project)  # collector.api.admin calls them after a deletion
    return component
