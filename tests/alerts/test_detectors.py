"""Detectors: thresholds, warm-up, seasonality and drift, and quality on a seeded set."""

from __future__ import annotations

import math

import numpy as np

from agentwatch_platform.alerts import quality
from agentwatch_platform.alerts.detectors import AnomalyDetector, ThresholdDetector
from agentwatch_platform.alerts.rules import load_rules


def default_cost_spike() -> AnomalyDetector:
    rule = next(r for r in load_rules().rules if r.name == "cost-per-hour-spike")
    assert isinstance(rule.condition, AnomalyDetector)
    return rule.condition


def test_threshold_above_and_below() -> None:
    above, below = ThresholdDetector(0.25), ThresholdDetector(0.8, direction="below")
    assert above.detect([0.1, 0.3], step_s=60).firing and not above.detect([0.3, 0.2], step_s=60).firing
    assert below.detect([0.5], step_s=60).firing and not below.detect([0.9], step_s=60).firing
    verdict = above.detect([None], step_s=60)
    assert not verdict.firing and not verdict.ready and verdict.reason == "no data"


def test_anomaly_waits_for_history() -> None:
    detector = AnomalyDetector(season_s=0, min_history=10)
    verdict = detector.detect([1.0] * 5 + [100.0], step_s=60)
    assert not verdict.firing and not verdict.ready and "learning baseline: 5/10" in verdict.reason
    assert detector.detect([1.0, 1.1, 0.9] * 4 + [100.0], step_s=60).firing


def test_seasonal_detector_waits_for_a_whole_season() -> None:
    detector = default_cost_spike()
    assert detector.required_history(3600) == 48
    assert not detector.detect([1.0] * 30 + [50.0], step_s=3600).ready


def daily(days: int, *, seed: int = 1, drift: float = 0.0) -> list[float]:
    rng = np.random.default_rng(seed)
    t = np.arange(days * 24)
    values = (
        10 * (1 + 0.5 * np.sin(2 * math.pi * t / 24)) * np.exp(drift * t / len(t)) * np.exp(rng.normal(0, 0.1, len(t)))
    )
    return values.tolist()


def test_daily_peak_is_not_an_anomaly_but_a_spike_at_night_is() -> None:
    detector = default_cost_spike()
    values = daily(8)
    peak = max(range(len(values) - 24, len(values)), key=values.__getitem__)
    trough = min(range(len(values) - 24, len(values)), key=values.__getitem__)
    assert not detector.detect(values[: peak + 1], step_s=3600).firing
    night_spike = values[:trough] + [values[peak] * 1.2]  # a peak-hour level at the quietest hour
    verdict = detector.detect(night_spike, step_s=3600)
    assert verdict.firing and verdict.baseline is not None and verdict.baseline < values[peak] / 2


def test_slow_drift_never_fires() -> None:
    detector = default_cost_spike()
    for seed in (1, 2, 3):
        values = daily(10, seed=seed, drift=0.8)  # +120% over ten days
        assert quality.episodes(detector, values, 3600) == []


def test_step_fires_once_then_relearns() -> None:
    detector = default_cost_spike()
    values = daily(6)
    values[5 * 24 :] = [v * 4 for v in values[5 * 24 :]]
    values += [v * 4 for v in daily(2, seed=9)]
    starts = quality.episodes(detector, values, 3600)
    assert starts == [5 * 24]


def test_hysteresis_keeps_a_firing_alert_firing_just_below_the_fire_threshold() -> None:
    detector = AnomalyDetector(season_s=0, min_history=10, z=6, z_resolve=2)
    history = [10.0, 10.5, 9.5, 10.2, 9.8] * 4
    fire = detector.detect(history + [100.0], step_s=60)
    assert fire.firing and fire.threshold is not None
    middle = (fire.threshold + (fire.baseline or 0)) / 2 + 1  # below the fire threshold, above the resolve one
    assert not detector.detect(history + [middle], step_s=60).firing
    assert detector.detect(history + [middle], step_s=60, firing=True).firing


def test_a_near_idle_baseline_does_not_hide_a_spike() -> None:
    """Seen in CI's demo under load: a baseline of $0, $0.0001 and $0.004 buckets read in log
    space as orders of magnitude of noise, and a $0.08 spike stayed under a $0.26 threshold.
    Values below min_delta cannot alert, so their spread must not widen the band."""
    detector = AnomalyDetector(
        transform="log", z=3, z_resolve=0.5, min_ratio=3, min_delta=0.03, history_s=40, season_s=0, min_history=3
    )
    idle = [8.5e-05, 0.0002616, 0.0, 0.0040621]  # before: threshold $7.75
    verdict = detector.detect([*idle, 0.0768], step_s=5)
    assert verdict.ready and verdict.firing, verdict
    assert not detector.detect([*idle, 0.02], step_s=5).firing  # within min_delta of the baseline: no page


def test_below_direction_detects_a_drop() -> None:
    detector = AnomalyDetector(direction="below", season_s=0, min_history=12, z=4, min_delta=0.15)
    rates = [0.9, 0.88, 0.92, 0.91, 0.89, 0.9] * 3
    assert detector.detect(rates + [0.5], step_s=3600).firing
    assert not detector.detect(rates + [0.86], step_s=3600).firing


def test_default_cost_spike_detector_quality_on_seeded_set() -> None:
    """The bench's scoring on a smaller seeded set: precision and recall >= 0.9, delay <= 2 windows."""
    series = quality.generate(20, days=12, seed=3)
    score = quality.score(default_cost_spike(), series, step_s=3600)
    assert score.events >= 10
    assert score.precision >= 0.9, score.as_dict()
    assert score.recall >= 0.9, score.as_dict()
    assert score.false_positives_by_kind["drift"] == 0 and score.false_positives_by_kind["seasonal"] == 0
