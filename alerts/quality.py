"""Detection quality on seeded synthetic series: what ``bench/alerts_quality.py`` reports.

Each series is an hourly metric (think cost per hour of one agent): a level, a daily pattern,
slow drift and multiplicative noise, plus labelled events. Spikes (a few buckets) and steps
(a lasting jump) must alert; noise, seasonality and drift alone must not. The detector is run
the way the evaluator runs it: bucket by bucket, seeing only the past, with its own firing
state fed back (hysteresis). Scoring:

- an *episode* is a maximal stretch of firing buckets;
- an episode starting inside an event (from its first bucket to one bucket after its end) is
  attributed to it: the first is a true positive, any later one a duplicate (a flap);
- any other episode is a false positive;
- precision = true positives / all episodes (duplicates count against it);
- recall = events whose first episode started within ``max_delay_windows`` windows of the
  event's start (delay 1 = fired on the event's first bucket, at the end of that window).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from agentwatch_platform.alerts.budget import MonthCost
from agentwatch_platform.alerts.detectors import Detector
from agentwatch_platform.alerts.evaluator import Evaluator
from agentwatch_platform.alerts.rules import RulesConfig
from agentwatch_platform.alerts.sources import FigureQuery, SeriesQuery

KINDS = ("noise", "seasonal", "drift", "spike", "step")


@dataclass
class Event:
    kind: str  # spike | step
    start: int  # bucket index
    end: int  # exclusive
    factor: float


@dataclass
class Series:
    name: str
    kind: str
    values: list[float]
    events: list[Event] = field(default_factory=list)


@dataclass
class Score:
    series: int
    events: int
    detected: int
    true_positives: int
    false_positives: int
    duplicates: int
    delays: list[int]
    false_positives_by_kind: dict[str, int]

    @property
    def precision(self) -> float:
        episodes = self.true_positives + self.false_positives + self.duplicates
        return self.true_positives / episodes if episodes else 1.0

    @property
    def recall(self) -> float:
        return self.detected / self.events if self.events else 1.0

    def as_dict(self) -> dict[str, object]:
        return {
            "series": self.series,
            "events": self.events,
            "detected_in_time": self.detected,
            "true_positives": self.true_positives,
            "false_positives": self.false_positives,
            "duplicates": self.duplicates,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "delay_windows_median": statistics.median(self.delays) if self.delays else None,
            "delay_windows_max": max(self.delays) if self.delays else None,
            "false_positives_by_kind": self.false_positives_by_kind,
        }


def generate(n_series: int, *, days: int = 21, seed: int = 7, step_s: int = 3600) -> list[Series]:
    """Seeded series, the kinds in turn; events start after three days of history."""
    rng = np.random.default_rng(seed)
    per_day = 86400 // step_s
    return [_one_series(rng, KINDS[i % len(KINDS)], i, days * per_day, per_day) for i in range(n_series)]


def _one_series(rng: np.random.Generator, kind: str, index: int, n: int, per_day: int) -> Series:
    t = np.arange(n)
    level = math.exp(rng.uniform(math.log(0.5), math.log(50.0)))
    amplitude = 0.0 if kind == "noise" else rng.uniform(0.2, 0.6)
    daily = 1.0 + amplitude * np.sin(2 * math.pi * (t / per_day - rng.uniform()))
    drift_total = rng.uniform(-0.7, 0.7) if kind == "drift" else rng.uniform(-0.3, 0.3)
    drift = np.exp(drift_total * t / n)
    noise = np.exp(rng.normal(0.0, rng.uniform(0.05, 0.2), n))
    values = level * daily * drift * noise
    events = _events(rng, kind, n, per_day)
    for event in events:
        values[event.start : event.end] *= event.factor
    return Series(f"{kind}-{index}", kind, values.tolist(), events)


def _events(rng: np.random.Generator, kind: str, n: int, per_day: int) -> list[Event]:
    if kind == "spike":
        starts = [int(rng.integers(3 * per_day, n // 2)), int(rng.integers(n // 2 + per_day, n - 4))]
        return [Event("spike", s, s + int(rng.integers(1, 4)), float(rng.uniform(3.0, 8.0))) for s in starts]
    if kind == "step":
        start = int(rng.integers(3 * per_day, n - 2 * per_day))
        return [Event("step", start, n, float(rng.uniform(2.5, 4.0)))]
    return []


def episodes(detector: Detector, values: Sequence[float], step_s: int) -> list[int]:
    """Start indices of firing episodes when evaluated bucket by bucket (causal, with state)."""
    starts: list[int] = []
    firing = False
    for i in range(len(values)):
        verdict = detector.detect(values[: i + 1], step_s=step_s, firing=firing)
        if verdict.firing and not firing:
            starts.append(i)
        firing = verdict.firing
    return starts


def score(detector: Detector, series: list[Series], *, step_s: int = 3600, max_delay_windows: int = 2) -> Score:
    """Precision, recall and delays of ``detector`` over ``series`` (see module docstring)."""
    result = Score(len(series), 0, 0, 0, 0, 0, [], dict.fromkeys(KINDS, 0))
    for s in series:
        starts = episodes(detector, s.values, step_s)
        result.events += len(s.events)
        attributed = _attribute(s, starts, result)
        for event, first in attributed.items():
            delay = first - s.events[event].start + 1
            result.delays.append(delay)
            result.detected += delay <= max_delay_windows
    return result


def _attribute(s: Series, starts: list[int], result: Score) -> dict[int, int]:
    """Map event index -> first episode start; count false positives and duplicates."""
    first: dict[int, int] = {}
    for start in starts:
        owner = next((k for k, e in enumerate(s.events) if e.start <= start <= e.end), None)
        if owner is None:
            result.false_positives += 1
            result.false_positives_by_kind[s.kind] += 1
        elif owner in first:
            result.duplicates += 1
        else:
            first[owner] = start
            result.true_positives += 1
    return first


# --- incidents: the whole evaluator, not the detector alone -------------------------------------
# ``bench/alerts_quality.py`` runs the real ``Evaluator`` (masking of the incident's buckets,
# hysteresis, hold-down, repeat interval) over a synthetic source, once per window, and scores
# what an on-call engineer sees: incidents and pages.
INCIDENT_KINDS = ("noise", "seasonal", "drift", "spike", "plateau", "step")
MUST_RESOLVE = ("spike", "plateau")  # events with an end: the incident must end with them


def generate_incidents(
    n_series: int, *, days: int = 21, seed: int = 11, step_s: int = 3600, max_spike: int = 30
) -> list[Series]:
    """Seeded series, ``INCIDENT_KINDS`` in turn: spikes of 1..``max_spike`` windows (3-8x),
    noisy plateaus (5..``max_spike`` windows at 3-6x with 25-45 % noise inside), lasting steps."""
    rng = np.random.default_rng(seed)
    per_day = 86400 // step_s
    out = []
    for i in range(n_series):
        kind = INCIDENT_KINDS[i % len(INCIDENT_KINDS)]
        base = _one_series(
            rng, "seasonal" if kind in ("spike", "plateau", "step") else kind, i, days * per_day, per_day
        )
        values = np.array(base.values)
        events = _incident_events(rng, kind, len(values), per_day, max_spike)
        for event in events:
            values[event.start : event.end] *= event.factor
            if kind == "plateau":
                values[event.start : event.end] *= np.exp(
                    rng.normal(0.0, rng.uniform(0.25, 0.45), event.end - event.start)
                )
        out.append(Series(f"{kind}-{i}", kind, values.tolist(), events))
    return out


def _incident_events(rng: np.random.Generator, kind: str, n: int, per_day: int, max_spike: int) -> list[Event]:
    if kind in ("spike", "plateau"):
        low = 1 if kind == "spike" else 5
        first = int(rng.integers(3 * per_day, n // 2 - max_spike - 2))
        second = int(rng.integers(n // 2 + per_day, n - max_spike - 4))
        return [
            Event(
                kind,
                s,
                s + int(rng.integers(low, max_spike + 1)),
                float(rng.uniform(3.0, 8.0) if kind == "spike" else rng.uniform(3.0, 6.0)),
            )
            for s in (first, second)
        ]
    if kind == "step":
        start = int(rng.integers(3 * per_day, n - 3 * per_day))
        return [Event("step", start, n, float(rng.uniform(2.5, 4.0)))]
    return []


@dataclass
class Incident:
    series: str
    kind: str
    start: int  # the window index whose end it fired at, minus one (delay 1 = fired on the event's first window)
    end: int | None  # likewise for its end (``resolved_at``: the first clear window seen); None = still open
    pages: int  # firing + repeat notifications
    repeats: int
    resolved_notice: int | None = (
        None  # likewise for the ``resolved`` notice (``resolve_after`` windows confirm the end)
    )


class SyntheticSource:
    """``MetricSource`` and ``AlertHistory`` over in-memory series: one agent per series."""

    def __init__(self, series: list[Series], t0: float, step_s: int) -> None:
        self.series, self.t0, self.step = series, t0, step_s
        self.saved: dict[str, object] = {}

    def projects(self, now: float) -> list[str]:
        return ["bench"]

    def timeseries(self, project: str, query: SeriesQuery) -> object:
        start, end, step_s = query.start, query.end, query.step_s
        first, last = round((start - self.t0) / step_s), math.floor((end - self.t0) / step_s)  # complete buckets only
        points = [
            _Point(self.t0 + i * step_s, s.name, s.values[i])
            for s in self.series
            for i in range(max(first, 0), min(last, len(s.values)))
        ]
        return _Points(points)

    def month_cost(
        self, project: str, now: float, window_s: int, agent: str | None = None, model: str | None = None
    ) -> MonthCost:
        return MonthCost(now, 0.0, 0.0, 0.0, window_s)

    def run_states(self, project: str, query: FigureQuery) -> dict:
        return {}

    def firing(self, project: str) -> list:
        return []

    def save(self, alert: object) -> None:
        pass

    def record(self, delivery: object) -> None:
        pass

    def owed(self, project: str, since: float) -> tuple[list, set]:
        return [], set()


@dataclass(frozen=True)
class _Point:
    t: float
    group: str
    value: float | None


@dataclass(frozen=True)
class _Points:
    points: list[_Point]
    complete_until: float | None = None  # complete buckets only: no watermark trails the clock


class Pager:
    """The dispatcher's ``submit``: keeps every notification instead of delivering it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []  # (event, series, alert_id)

    def submit(self, notification: object, channels: object) -> None:
        alert = notification.alert  # type: ignore[attr-defined]
        self.sent.append((notification.event, alert.scope.get("agent", ""), alert.alert_id))  # type: ignore[attr-defined]


def run_incidents(rule: object, series: list[Series], *, step_s: int) -> list[Incident]:
    """Evaluate ``rule`` (agent scope ``*``) over every series, once per window, at the start
    of the next window; return the incidents with their windows and pages."""
    t0 = 1_700_006_400 // step_s * step_s
    source, pager = SyntheticSource(series, t0, step_s), Pager()
    config = RulesConfig((rule,), {}, None, "bench")  # type: ignore[arg-type]
    evaluator = Evaluator(config, source, source, pager, clock=lambda: 0.0)  # type: ignore[arg-type]
    incidents: dict[str, Incident] = {}
    kinds = {s.name: s.kind for s in series}
    for i in range(len(series[0].values)):
        for event, alert in evaluator.run_once(now=t0 + (i + 1) * step_s + 1):
            name = alert.scope["agent"]
            if event == "firing":
                incidents[alert.alert_id] = Incident(name, kinds[name], i, None, 1, 0)
            elif event == "repeat":
                incidents[alert.alert_id].pages += 1
                incidents[alert.alert_id].repeats += 1
            elif event == "resolved":
                assert alert.resolved_at is not None  # a resolved incident carries its time
                incidents[alert.alert_id].end = round((alert.resolved_at - t0 - 1) / step_s) - 1
                incidents[alert.alert_id].resolved_notice = i
    return list(incidents.values())


def score_incidents(
    series: list[Series], incidents: list[Incident], *, max_delay_windows: int = 2
) -> dict[str, object]:
    """Per seeded event: incidents opened for it (1 = no flap), delay, duration error; precision
    over all incidents; the figures per event kind."""
    by_series: dict[str, list[Incident]] = {}
    for incident in incidents:
        by_series.setdefault(incident.series, []).append(incident)
    rows, false_positives = [], dict.fromkeys(INCIDENT_KINDS, 0)
    for s in series:
        mine = sorted(by_series.get(s.name, []), key=lambda x: x.start)
        owned: set[int] = set()
        for event in s.events:
            hits = [x for x in mine if event.start <= x.start <= event.end]
            owned.update(id(x) for x in hits)
            rows.append(_event_row(s, event, hits, len(s.values), max_delay_windows))
        false_positives[s.kind] += sum(id(x) not in owned for x in mine)
    return _summary(rows, false_positives, len(incidents))


def _event_row(s: Series, event: Event, hits: list[Incident], n: int, max_delay: int) -> dict[str, object]:
    first = hits[0] if hits else None
    row: dict[str, object] = {
        "series": s.name,
        "kind": event.kind,
        "length": event.end - event.start,
        "incidents": len(hits),
    }
    if first is not None:
        row["delay"] = first.start - event.start + 1
        row["pages"] = first.pages
        row["repeats"] = first.repeats
        end = first.end if first.end is not None else n
        row["duration"] = end - first.start
        row["duration_error"] = (end - first.start) - (event.end - event.start) if event.kind in MUST_RESOLVE else None
        row["notice_lag"] = (
            first.resolved_notice - event.end + 1
            if event.kind in MUST_RESOLVE and first.resolved_notice is not None
            else None
        )
        row["detected"] = row["delay"] <= max_delay  # type: ignore[operator]
    else:
        row.update(delay=None, pages=0, repeats=0, duration=None, duration_error=None, notice_lag=None, detected=False)
    return row


def _summary(rows: list[dict[str, object]], false_positives: dict[str, int], n_incidents: int) -> dict[str, object]:
    detected = [r for r in rows if r["incidents"]]
    true_positives = len(detected)
    errors = [abs(cast(float, r["duration_error"])) for r in rows if r["duration_error"] is not None]
    delays = [cast(float, r["delay"]) for r in detected]
    lags = [cast(float, r["notice_lag"]) for r in rows if r.get("notice_lag") is not None]
    out: dict[str, object] = {
        "events": len(rows),
        "incidents": n_incidents,
        "true_positives": true_positives,
        "false_positives": sum(false_positives.values()),
        "false_positives_by_kind": false_positives,
        "extra_incidents_for_one_event (flaps)": sum(max(int(r["incidents"]) - 1, 0) for r in rows),  # type: ignore[call-overload]
        "precision": round(true_positives / n_incidents, 4) if n_incidents else 1.0,
        "recall": round(sum(bool(r["detected"]) for r in rows) / len(rows), 4) if rows else 1.0,
        "incidents_per_detected_event": (
            round(sum(int(cast(int, r["incidents"])) for r in detected) / len(detected), 4) if detected else None
        ),
        "delay_windows_median": statistics.median(delays) if delays else None,
        "delay_windows_max": max(delays) if delays else None,
        "duration_error_windows_median": statistics.median(errors) if errors else None,
        "duration_error_windows_max": max(errors) if errors else None,
        "duration_within_2_windows": round(sum(e <= 2 for e in errors) / len(errors), 4) if errors else None,
        "resolved_notice_lag_windows_median": statistics.median(lags) if lags else None,
        "resolved_notice_lag_windows_max": max(lags) if lags else None,
        "by_kind": {},
    }
    for kind in sorted({str(r["kind"]) for r in rows}):
        mine = [r for r in rows if r["kind"] == kind]
        errs = [abs(cast(float, r["duration_error"])) for r in mine if r["duration_error"] is not None]
        out["by_kind"][kind] = {  # type: ignore[index]
            "events": len(mine),
            "detected_in_time": sum(bool(r["detected"]) for r in mine),
            "incidents_per_event_max": max(int(r["incidents"]) for r in mine),  # type: ignore[call-overload]
            "pages_per_incident_max": max(int(r["pages"]) for r in mine),  # type: ignore[call-overload]
            "repeats": sum(int(r["repeats"]) for r in mine),  # type: ignore[call-overload]
            "duration_error_max": max(errs) if errs else None,
            "duration_median": (
                statistics.median([cast(float, r["duration"]) for r in mine if r["duration"] is not None])
                if any(r["duration"] is not None for r in mine)
                else None
            ),
        }
    out["rows"] = rows
    return out
