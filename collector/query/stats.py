"""The tests that say whether a difference between two sets of runs is beyond noise.

Two tests, both at the 95 % level, both stated in the API docs (``GET /api/versions/compare``):

- **Means** (cost, tokens, steps, latency per run; feedback score per rated run): Welch's t-test,
  which does not assume equal variances (a costlier release often also varies more). The
  interval is ``(mean_b - mean_a) ± t(0.975, df) · se`` with ``se² = s_a²/n_a + s_b²/n_b`` and
  the Welch–Satterthwaite ``df``; the t quantile is found from the regularised incomplete beta
  function (no SciPy in the collector).
- **Proportions** (success rate): the two-proportion z-test (pooled proportion for the p-value),
  with the unpooled Wald interval ``(p_b - p_a) ± 1.96 · √(p_a(1-p_a)/n_a + p_b(1-p_b)/n_b)``.

"Beyond noise" means p < 0.05, i.e. the interval excludes 0. A side with fewer than two values
(one for a proportion) has no test: the difference is given, ``significant`` is false.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.95
ALPHA = 1 - LEVEL
Z_975 = 1.959963984540054


@dataclass(frozen=True)
class Difference:
    """``b - a`` with its 95 % interval and p-value (None where no test applies)."""

    difference: float | None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < ALPHA


def welch(a: Sequence[float], b: Sequence[float]) -> Difference:
    """Welch's t-test of mean(b) - mean(a)."""
    if not a or not b:
        return Difference(None)
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    diff = mean_b - mean_a
    if len(a) < 2 or len(b) < 2:
        return Difference(diff)
    va, vb = _variance(a, mean_a) / len(a), _variance(b, mean_b) / len(b)
    se2 = va + vb
    if se2 == 0:  # no spread at all: any difference is exact, none is nothing
        return Difference(diff, diff, diff, 0.0 if diff else 1.0)
    df = se2**2 / ((va**2 / (len(a) - 1) if va else 0.0) + (vb**2 / (len(b) - 1) if vb else 0.0))
    se = math.sqrt(se2)
    half = t_quantile(1 - ALPHA / 2, df) * se
    return Difference(diff, diff - half, diff + half, t_two_sided_p(diff / se, df))


def two_proportions(successes_a: int, n_a: int, successes_b: int, n_b: int) -> Difference:
    """The two-proportion z-test of p_b - p_a."""
    if n_a < 1 or n_b < 1:
        return Difference(None)
    pa, pb = successes_a / n_a, successes_b / n_b
    diff = pb - pa
    pooled = (successes_a + successes_b) / (n_a + n_b)
    se_pooled = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    half = Z_975 * math.sqrt(pa * (1 - pa) / n_a + pb * (1 - pb) / n_b)
    if se_pooled == 0:  # both all successes or all failures: equal
        return Difference(diff, diff - half, diff + half, 1.0)
    p = math.erfc(abs(diff / se_pooled) / math.sqrt(2))
    return Difference(diff, diff - half, diff + half, p)


def _variance(values: Sequence[float], mean: float) -> float:
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| > |t|) for Student's t with ``df`` degrees of freedom."""
    return _incomplete_beta(df / 2, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t, by bisection on the two-sided tail."""
    tail = 2 * (1 - p)
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > tail:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, df) > tail else (lo, mid)
    return (lo + hi) / 2


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (Numerical Recipes' continued fraction)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h
