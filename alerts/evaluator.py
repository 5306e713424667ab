"""The scheduled evaluator: rules over metrics, one state machine per fingerprint, notifications.

Each (project, rule, scope) has a fingerprint. Its state machine:

- not firing, condition breached -> a new alert (state ``firing``), notified once (``firing``);
- firing, still breached -> notified again (``repeat``) only once ``cooldown`` has passed
  since the last notification;
- firing, no longer breached (or no data any more) -> ``resolved``, notified once.

A rule whose data cannot be read is skipped for this round and changes nothing (unknown is
not resolved). State changes are rows in ClickHouse (``alerts``); firing alerts are reloaded
from there on start, so a restart neither re-notifies nor forgets to resolve. Notifications
go to the ``Dispatcher``, which delivers in the background: evaluation never waits on a
channel.

Buckets: a rule with ``window: 1h`` reads buckets of one hour aligned to the epoch. The
last *complete* bucket is judged; for additive or maximum metrics with an ``above`` condition
the current *partial* bucket is judged too (a partial sum or max only grows), so a spike can
fire before its hour is over. Resolution waits for a complete bucket. A rule is read at most
every sixth of its window (``RUNS_PER_WINDOW``), however short the evaluation interval.
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
from collections.abc import Callable
from typing import Any

from alerts.channels import Dispatcher
from alerts.detectors import Verdict
from alerts.errors import AlertsError
from alerts.model import Alert, Event, Notification
from alerts.rules import DERIVED_METRICS, Rule, RulesConfig, load_rules
from alerts.sources import AlertHistory, MetricSource, StoreBackend
from collector.api.schemas import TimeSeries

log = logging.getLogger("agentwatch.alerts")

# Metrics whose partial bucket can only grow towards the complete value.
MONOTONE = frozenset({"runs", "cost_usd", "input_tokens", "output_tokens", "tool_calls", "max_run_cost_usd", "max_steps"})
ADDITIVE = frozenset({"runs", "cost_usd", "input_tokens", "output_tokens", "tokens_per_s", "tool_calls"})

RUNS_PER_WINDOW = 6
Observation = tuple[dict[str, str], Verdict]


def fingerprint(project: str, rule: str, scope: dict[str, str]) -> str:
    """Stable identity of what an alert is about; the same across restarts and processes."""
    return hashlib.sha256(json.dumps([project, rule, sorted(scope.items())]).encode()).hexdigest()[:16]


class Evaluator:
    """Evaluates every rule for every project; ``run_once`` is one round (thread-safe to call in turn)."""

    def __init__(
        self, config: RulesConfig, source: MetricSource, history: AlertHistory, dispatcher: Dispatcher, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.config, self.source, self.history, self.dispatcher, self.clock = config, source, history, dispatcher, clock
        self._active: dict[str, dict[str, Alert]] = {}  # project -> fingerprint -> firing alert
        self._last_run: dict[tuple[str, str], float] = {}  # (project, rule) -> last evaluation
        self.errors = 0
        self.rounds = 0

    def run_once(self, now: float | None = None) -> list[tuple[Event, Alert]]:
        """One evaluation round; returns the notifications it sent (event, alert snapshot)."""
        now = self.clock() if now is None else now
        sent: list[tuple[Event, Alert]] = []
        try:
            projects = self.source.projects(now)
        except AlertsError as exc:
            self._error("listing projects", exc)
            return sent
        for project in projects:
            sent += self._project(project, now)
        self.rounds += 1
        return sent

    def _error(self, what: str, exc: Exception) -> None:
        self.errors += 1
        log.warning("alerts: %s failed, skipped this round: %s", what, exc)

    def _project(self, project: str, now: float) -> list[tuple[Event, Alert]]:
        active = self._load(project)
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
            alert.state, alert.resolved_at, alert.updated_at = "resolved", now, max(now, alert.updated_at + 0.001)
            alert.message = f"{alert.rule}: resolved, the rule is no longer configured"
            log.info("alert %s of project %s resolved: its rule is gone", alert.rule, project)
            try:
                self.history.save(dataclasses.replace(alert))
            except AlertsError as exc:
                self._error(f"saving alert {alert.alert_id}", exc)

    def _due(self, rule: Rule, project: str, now: float) -> bool:
        """A rule is read at most every sixth of its window (a 1 h rule every 10 min): its
        value changes by the bucket, and the collector's store is not queried for nothing."""
        last = self._last_run.get((project, rule.name))
        if last is not None and 0 <= now - last < rule.window_s / RUNS_PER_WINDOW:
            return False
        self._last_run[(project, rule.name)] = now
        return True

    def _load(self, project: str) -> dict[str, Alert] | None:
        """Firing alerts of a project, from the history the first time it is seen."""
        if project not in self._active:
            try:
                self._active[project] = {a.fingerprint: a for a in self.history.firing(project)}
            except AlertsError as exc:
                self._error(f"loading firing alerts of {project}", exc)
                return None
        return self._active[project]

    # --- observing -------------------------------------------------------------------------
    def _observe(self, rule: Rule, project: str, now: float, active: dict[str, Alert]) -> list[Observation]:
        """A verdict per scope (per agent or model), plus 'no data' for firing scopes that vanished."""
        filters = rule.filters()
        agent, model = filters.get("agent"), filters.get("model")
        if rule.metric in DERIVED_METRICS:
            value = self.source.projected_month_cost(project, now, agent, model)
            firing = fingerprint(project, rule.name, filters) in active
            observations = [(filters, rule.condition.detect([value], step_s=rule.window_s, firing=firing))]
        else:
            observations = self._observe_series(rule, project, now, active, agent, model)
        seen = {fingerprint(project, rule.name, scope) for scope, _ in observations}
        for fp, alert in active.items():
            if alert.rule == rule.name and fp not in seen:
                observations.append((alert.scope, Verdict(False, False, None, reason="no data")))
        return observations

    def _observe_series(self, rule: Rule, project: str, now: float, active: dict[str, Alert], agent: str | None, model: str | None) -> list[Observation]:
        step = rule.window_s
        current = math.floor(now / step) * step  # start of the partial bucket
        count = rule.condition.history_buckets(step) + 1
        start = current - count * step
        end = max(now, current + 1e-3)
        series = self.source.timeseries(project, rule.metric, start, end, step, rule.group_by, agent, model)
        groups = _by_group(series, start, step, count + 1, rule.metric in ADDITIVE)
        if rule.min_runs:
            runs = _by_group(self.source.timeseries(project, "runs", start, end, step, rule.group_by, agent, model), start, step, count + 1, True)
            groups = {g: _enough_runs(values, runs.get(g, []), rule.min_runs) for g, values in groups.items()}
        observations = []
        for group, values in groups.items():
            scope = {**rule.filters(), **({rule.group_by: group} if rule.group_by != "none" else {})}
            firing = fingerprint(project, rule.name, scope) in active
            observations.append((scope, self._judge(rule, values, firing)))
        return observations

    def _judge(self, rule: Rule, values: list[float | None], firing: bool) -> Verdict:
        """The last complete bucket; for monotone 'above' rules also the partial one."""
        complete, partial = values[:-1], values[-1]
        verdict = rule.condition.detect(complete, step_s=rule.window_s, firing=firing)
        if verdict.firing or partial is None or rule.metric not in MONOTONE or rule.condition.direction != "above":
            return verdict
        early = rule.condition.detect(complete[1:] + [partial], step_s=rule.window_s, firing=firing)
        return early if early.firing else verdict

    # --- the state machine -----------------------------------------------------------------
    def _step(self, rule: Rule, project: str, scope: dict[str, str], verdict: Verdict, active: dict[str, Alert], now: float) -> list[tuple[Event, Alert]]:
        fp = fingerprint(project, rule.name, scope)
        alert = active.get(fp)
        if verdict.firing and alert is None:
            alert = Alert(project, _alert_id(fp, now), fp, rule.name, rule.severity, "firing", scope, rule.metric, None, None, None, "", now)
            active[fp] = alert
            return self._change(rule, alert, verdict, "firing", now)
        if verdict.firing and alert is not None:
            last = alert.last_notified_at if alert.last_notified_at is not None else alert.started_at
            if now - last >= rule.cooldown_s:
                return self._change(rule, alert, verdict, "repeat", now)
            _update(alert, verdict, rule)
            return []
        if alert is not None:
            del active[fp]
            alert.state, alert.resolved_at = "resolved", now
            return self._change(rule, alert, verdict, "resolved", now)
        return []

    def _change(self, rule: Rule, alert: Alert, verdict: Verdict, event: Event, now: float) -> list[tuple[Event, Alert]]:
        """Record the new state, then hand the notification to the dispatcher."""
        _update(alert, verdict, rule, resolved=event == "resolved")
        alert.last_notified_at = now
        alert.updated_at = max(now, alert.updated_at + 0.001)  # a strictly newer version
        snapshot = dataclasses.replace(alert, scope=dict(alert.scope))
        try:
            self.history.save(snapshot)
        except AlertsError as exc:
            self._error(f"saving alert {alert.alert_id}", exc)
        self.dispatcher.submit(Notification(event, snapshot, now, rule.description), rule.channels)
        log.info("alert %s %s: %s", event, rule.name, alert.message)
        return [(event, snapshot)]


def _update(alert: Alert, verdict: Verdict, rule: Rule, *, resolved: bool = False) -> None:
    """Carry the latest figures and message; a resolution keeps the figures that fired."""
    if not resolved:
        alert.value, alert.baseline, alert.threshold = verdict.value, verdict.baseline, verdict.threshold
    alert.message = _message(rule, alert.scope, verdict, resolved)


def _message(rule: Rule, scope: dict[str, str], verdict: Verdict, resolved: bool) -> str:
    where = f" [{', '.join(f'{k}={v}' for k, v in sorted(scope.items()))}]" if scope else ""
    if resolved:
        now_value = "no data" if verdict.value is None else f"{verdict.value:.4g}"
        return f"{rule.name}{where}: resolved, {rule.metric} now {now_value}"
    figures = [f"baseline {verdict.baseline:.4g}"] if verdict.baseline is not None else []
    figures += [f"threshold {verdict.threshold:.4g}"] if verdict.threshold is not None else []
    value = "n/a" if verdict.value is None else f"{verdict.value:.4g}"
    return f"{rule.name}{where}: {rule.metric} = {value} ({', '.join(figures)})"


def _enough_runs(values: list[float | None], runs: list[float | None], min_runs: int) -> list[float | None]:
    """``values`` with the buckets of fewer than ``min_runs`` runs blanked out."""
    return [v if i < len(runs) and (runs[i] or 0) >= min_runs else None for i, v in enumerate(values)]


def _alert_id(fp: str, started_at: float) -> str:
    return hashlib.sha256(f"{fp}:{started_at:.3f}".encode()).hexdigest()[:20]


def _by_group(series: TimeSeries, start: float, step: int, count: int, additive: bool) -> dict[str, list[float | None]]:
    """Dense per-group values for ``count`` buckets from ``start`` (missing additive -> 0)."""
    empty: float | None = 0.0 if additive else None
    groups: dict[str, list[float | None]] = {}
    for point in series.points:
        index = round((point.t - start) / step)
        if 0 <= index < count:
            groups.setdefault(point.group, [empty] * count)[index] = point.value if point.value is not None else empty
    return {group: _from_first_data(values) for group, values in groups.items()}


def _from_first_data(values: list[float | None]) -> list[float | None]:
    """Buckets before a group's first non-zero value are no history, not a baseline of zero
    (an agent deployed an hour ago has one hour of history, not a week of zero cost)."""
    first = next((i for i, v in enumerate(values) if v), len(values))
    return [None] * first + values[first:]


# --- in the collector process ---------------------------------------------------------------
class InProcessAlerts:
    """The evaluator as a component with a lifetime, started by the collector's lifespan.

    Rules come from ``settings.alert_rules`` (built-in defaults when empty); a bad rules file
    is logged with its line and key and alerts stay off, so ingestion never stops for it.
    Each round runs in a worker thread every ``settings.alert_interval_s`` seconds.
    """

    def __init__(self, store: Any, settings: Any, *, clock: Callable[[], float] = time.time, config: RulesConfig | None = None) -> None:
        self.store, self.settings, self.clock = store, settings, clock
        self.config = config
        self.evaluator: Evaluator | None = None
        self._dispatcher: Dispatcher | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None

    async def __aenter__(self) -> InProcessAlerts:
        if self.config is None:
            try:
                self.config = load_rules(self.settings.alert_rules or None)
            except AlertsError as exc:
                log.error("alert rules not loaded, in-process alerts are off: %s", exc)
                return self
        backend = StoreBackend(self.store)
        self._dispatcher = Dispatcher(self.config.channels, record=backend.record, policy=self.config.delivery, clock=self.clock)
        self.evaluator = Evaluator(self.config, backend, backend, self._dispatcher, clock=self.clock)
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="agentwatch-alerts")
        return self

    async def _loop(self) -> None:
        assert self.evaluator is not None and self._stop is not None
        while not self._stop.is_set():
            try:
                await asyncio.to_thread(self.evaluator.run_once)
            except Exception:  # a bug in one round must not end the schedule
                log.exception("alert evaluation round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=float(self.settings.alert_interval_s))

    async def __aexit__(self, *exc_info: object) -> None:
        """Stop after the round in progress: a round left running could reopen a closed store."""
        if self._task is not None and self._stop is not None:
            self._stop.set()
            await self._task
        if self._dispatcher is not None:
            await asyncio.to_thread(self._dispatcher.close)


def start_in_process(app: Any) -> InProcessAlerts:
    """The collector lifespan's hook: the component over ``app.state.store``/``settings``.

    The clock is looked up at every reading: ``app.state.alerts_clock`` (tests drive time with
    it), else ``app.state.clock``, else wall time.
    """
    state = app.state

    def clock() -> float:
        return (getattr(state, "alerts_clock", None) or getattr(state, "clock", None) or time.time)()

    component = InProcessAlerts(state.store, state.settings, clock=clock)
    state.alerts = component
    return component
