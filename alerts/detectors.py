"""Detectors: from a metric's buckets, decide whether a rule is breached now.

A detector sees evenly spaced buckets (oldest first, ``None`` for a bucket without data); the
last one is the bucket under test, the rest its history. It returns a ``Verdict`` that carries
the value, the baseline and the threshold in the metric's own units, so a notification can
say "cost $41.20/h, usual $6.10/h, alert above $15.80/h".

``ThresholdDetector`` compares against a fixed value. ``AnomalyDetector`` learns the baseline
from the trailing history; its design, chosen to cope with what real agent traffic does:

1. *Transform.* Cost and token series are multiplicative (twice the users, twice the cost, and
   noise grows with the level), so ``transform: log`` models ``log(x + c)`` with ``c`` a tenth
   of the typical positive value; empty hours stay finite and the noise becomes roughly
   constant. Rates and scores use ``transform: none``.
2. *Daily seasonality.* When the history covers a season (``season``, default one day) plus
   ``min_history`` buckets, the seasonal expectation of bucket ``i`` is the median of the same
   phase over up to ``seasons`` previous seasons (``i-P``, ``i-2P``, ...). A median of several
   days ignores a one-off spike yesterday at the same hour.
3. *Level and slow drift.* Residuals from that seasonal expectation (the raw values when there
   is no season) feed an EWMA level whose updates are clipped to +/-2 scales (a Huber-type
   EWMA): slow drift moves the level along, while a spike, or the first buckets of a step,
   barely moves it. When ``relearn_after`` buckets in a row all sit beyond the clip on the same
   side, the change is the new normal (a step, a new release): the level jumps to their
   median, the alert resolves, and it does not flap while the seasonal medians catch up.
4. *Noise scale.* The robust scale is the median absolute deviation of the residuals' first
   differences divided by sqrt(2) (times 1.4826): differencing removes level and drift, the
   median ignores spikes in the history.
5. *Decision.* Fire when the bucket is more than ``z`` scales beyond the expectation and also
   beyond ``min_ratio`` times and ``min_delta`` away from the baseline (guards against alerting
   on tiny absolute changes of a very steady series). A firing alert resolves only below
   ``z_resolve`` scales (hysteresis, no flapping).
6. *Warm-up.* Nothing fires (``ready`` False) before ``min_history`` buckets of data, plus one
   whole season when seasonality is on: a daily pattern is not judged before it was seen.

``bench/alerts_quality.py`` measures precision, recall and delay of the default cost-spike
detector on seeded synthetic series.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import ClassVar, Protocol

import numpy as np

DIRECTIONS = ("above", "below")
TRANSFORMS = ("none", "log")
_MAD_TO_SIGMA = 1.4826
_HUBER_CLIP = 2.0


@dataclass(frozen=True)
class Verdict:
    """What a detector decided about the last bucket; values are in the metric's units."""

    firing: bool
    ready: bool  # False while there is no data or too little history to judge
    value: float | None
    baseline: float | None = None
    threshold: float | None = None
    reason: str = ""


class Detector(Protocol):
    """A rule's condition. ``detect`` must not raise on missing or odd data: it says not ready."""

    kind: ClassVar[str]
    direction: str

    def history_buckets(self, step_s: int) -> int:
        """How many buckets before the one under test the detector wants to see."""

    def detect(self, values: Sequence[float | None], *, step_s: int, firing: bool = False, hidden: int = 0) -> Verdict:
        """Judge ``values[-1]``; ``firing`` says whether the alert is firing now (hysteresis);
        ``hidden`` buckets of the history were blanked (an open incident's): look that much further back."""

    def describe(self) -> dict[str, object]:
        """The condition as plain data (served by ``GET /api/alerts/rules``)."""


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")


def _last_value(values: Sequence[float | None]) -> float | None:
    if not values or values[-1] is None or not math.isfinite(values[-1]):
        return None
    return float(values[-1])


def _breaches(value: float, threshold: float, direction: str) -> bool:
    return value > threshold if direction == "above" else value < threshold


@dataclass(frozen=True)
class ThresholdDetector:
    """Fires while the bucket is above (or below) a fixed value: rates, step counts, budgets."""

    threshold: float
    direction: str = "above"
    kind: ClassVar[str] = "threshold"

    def __post_init__(self) -> None:
        _check_choice("direction", self.direction, DIRECTIONS)
        if not math.isfinite(self.threshold):
            raise ValueError("threshold must be a finite number")

    def history_buckets(self, step_s: int) -> int:
        return 0

    def detect(self, values: Sequence[float | None], *, step_s: int, firing: bool = False, hidden: int = 0) -> Verdict:
        value = _last_value(values)
        if value is None:
            return Verdict(False, False, None, threshold=self.threshold, reason="no data")
        breached = _breaches(value, self.threshold, self.direction)
        return Verdict(
            breached,
            True,
            value,
            threshold=self.threshold,
            reason=f"{self.direction} {self.threshold:g}" if breached else "",
        )

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class AnomalyDetector:
    """Fires when a bucket departs from the baseline learned from its trailing history."""

    direction: str = "above"
    z: float = 6.0
    z_resolve: float = 3.0
    min_ratio: float = 1.0
    min_delta: float = 0.0
    history_s: float = 7 * 86400.0
    season_s: float = 86400.0  # 0 = no seasonality
    seasons: int = 7
    min_history: int = 24
    transform: str = "none"
    alpha: float = 0.1
    relearn_after: int = 12
    kind: ClassVar[str] = "anomaly"

    def __post_init__(self) -> None:
        _check_choice("direction", self.direction, DIRECTIONS)
        _check_choice("transform", self.transform, TRANSFORMS)
        if not 0 < self.z_resolve <= self.z:
            raise ValueError(f"need 0 < z_resolve <= z, got z={self.z:g}, z_resolve={self.z_resolve:g}")
        if self.min_ratio < 1 or self.min_delta < 0:
            raise ValueError("min_ratio must be >= 1 and min_delta >= 0")
        if self.history_s <= 0 or self.season_s < 0 or self.seasons < 1 or self.min_history < 3:
            raise ValueError("need history > 0, season >= 0, seasons >= 1 and min_history >= 3")
        if not 0 < self.alpha <= 1 or self.relearn_after < 1:
            raise ValueError("alpha must be in (0, 1] and relearn_after >= 1")

    def history_buckets(self, step_s: int) -> int:
        return max(int(self.history_s // max(step_s, 1)), self.required_history(step_s))

    def required_history(self, step_s: int) -> int:
        """Buckets of data needed before the detector judges: min_history, plus a season."""
        return self.min_history + self._period(step_s)

    def _period(self, step_s: int) -> int:
        period = int(self.season_s // step_s) if step_s > 0 and self.season_s % step_s == 0 else 0
        return period if period >= 2 else 0

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, **asdict(self)}

    def detect(self, values: Sequence[float | None], *, step_s: int, firing: bool = False, hidden: int = 0) -> Verdict:
        value = _last_value(values)
        if value is None:
            return Verdict(False, False, None, reason="no data")
        x = np.array(
            [np.nan if v is None else v for v in values[-self.history_buckets(step_s) - max(hidden, 0) - 1 :]],
            dtype=float,
        )
        learned, required = int(np.count_nonzero(np.isfinite(x[:-1]))), self.required_history(step_s)
        if learned < required:
            return Verdict(False, False, value, reason=f"learning baseline: {learned}/{required} buckets")
        y, inverse = self._transform(x)
        base = self._seasonal_base(y, step_s)
        residuals = y - base
        scale = self._scale(residuals[:-1], y[:-1])
        expected = base[-1] + _robust_level(residuals[:-1], scale, self.alpha, self.relearn_after)
        return self._decide(value, expected, scale, inverse, firing)

    def _decide(
        self, value: float, expected: float, scale: float, inverse: Callable[[float], float], firing: bool
    ) -> Verdict:
        sign = 1.0 if self.direction == "above" else -1.0
        relax = self.z_resolve / self.z if firing else 1.0  # hysteresis for every guard
        baseline = inverse(expected)
        statistical = inverse(expected + sign * self.z * relax * scale)
        ratio, delta = self.min_ratio**relax, self.min_delta * relax
        if self.direction == "above":
            threshold = max(statistical, baseline * ratio, baseline + delta)
        else:
            threshold = min(statistical, baseline / ratio, baseline - delta)
        breached = _breaches(value, threshold, self.direction)
        reason = f"{self.direction} baseline {baseline:.4g} by more than threshold {threshold:.4g}" if breached else ""
        return Verdict(breached, True, value, baseline=baseline, threshold=threshold, reason=reason)

    def _transform(self, x: np.ndarray) -> tuple[np.ndarray, Callable[[float], float]]:
        if self.transform == "none":
            return x, float
        # The offset keeps log(0) finite and damps differences among values below min_delta:
        # those cannot alert (the min_delta guard), so their noise must not widen the band.
        # Without it a near-idle baseline ($0, $0.0001, $0.004) reads as orders of magnitude of
        # noise and a real spike stays under the statistical threshold.
        positive = x[:-1][np.isfinite(x[:-1]) & (x[:-1] > 0)]
        offset = max(0.1 * float(np.median(positive)) if positive.size else 1.0, self.min_delta)
        return np.log(np.clip(x, 0.0, None) + offset), lambda v: math.exp(v) - offset

    def _seasonal_base(self, y: np.ndarray, step_s: int) -> np.ndarray:
        """Median of the same phase over previous seasons; zeros when seasonality is off."""
        period = self._period(step_s)
        if not period or len(y) - 1 < period + self.min_history:
            return np.zeros_like(y)
        lagged = np.full((self.seasons, len(y)), np.nan)
        for k in range(1, self.seasons + 1):
            if k * period < len(y):
                lagged[k - 1, k * period :] = y[: len(y) - k * period]
        base = _column_medians(lagged)
        return base if np.isfinite(base[-1]) else np.zeros_like(y)

    def _scale(self, residuals: np.ndarray, y: np.ndarray) -> float:
        """Robust noise scale: MAD of first differences / sqrt(2), with a small floor."""
        diffs = np.diff(residuals)
        diffs = diffs[np.isfinite(diffs)]
        if diffs.size >= 3:
            spread = float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2)
        else:
            finite = residuals[np.isfinite(residuals)]
            spread = float(np.median(np.abs(finite - np.median(finite))))
        floor = 0.01 if self.transform == "log" else max(1e-9, 0.01 * abs(float(np.nanmedian(y))))
        return max(_MAD_TO_SIGMA * spread, floor)


def _column_medians(a: np.ndarray) -> np.ndarray:
    """Median of the finite values of each column (NaN where none); ``np.nanmedian`` is ~20x slower."""
    ordered = np.sort(a, axis=0)  # NaN sorts last
    count = np.count_nonzero(np.isfinite(a), axis=0)
    out = np.full(a.shape[1], np.nan)
    cols = np.flatnonzero(count)
    lo, hi = (count[cols] - 1) // 2, count[cols] // 2
    out[cols] = (ordered[lo, cols] + ordered[hi, cols]) / 2
    return out


def _robust_level(residuals: np.ndarray, scale: float, alpha: float, relearn_after: int) -> float:
    """EWMA of the residuals, updates clipped to +/-2 scales; re-learned after a lasting shift."""
    finite = residuals[np.isfinite(residuals)]
    if finite.size == 0:
        return 0.0
    level = float(np.median(finite[:5]))
    limit = _HUBER_CLIP * scale
    run: list[float] = []
    for r in finite.tolist():
        error = r - level
        if abs(error) <= limit:
            run = []
        elif run and (run[-1] > level) != (error > 0):
            run = [r]
        else:
            run.append(r)
        if len(run) >= relearn_after:
            level, run = float(np.median(run)), []
        else:
            level += alpha * min(max(error, -limit), limit)
    return level
