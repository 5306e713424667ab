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

import numpy as np

from alerts.detectors import Detector

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
