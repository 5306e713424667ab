"""Per-run budgets and the SDK's exception tree.

A ``Budget`` is checked before each LLM or tool call of its run. Once a limit is passed,
that call raises ``BudgetExceeded`` (which says which limit, the value reached, the maximum
and the overshoot) and the run span records ``agentwatch.budget.exceeded``. Limits are
checked before a call, so a run overshoots by at most the call that crossed the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class AgentwatchError(Exception):
    """Base of every exception the SDK raises on purpose."""


class BudgetExceeded(AgentwatchError):
    """A run passed one of its budget limits; raised by the next LLM or tool call."""

    def __init__(self, limit: str, value: float, maximum: float) -> None:
        self.limit = limit  # cost | steps | seconds
        self.value = value
        self.maximum = maximum
        self.over_by = value - maximum
        super().__init__(f"run budget exceeded: {_describe(limit, value, maximum)}")

    def __reduce__(self) -> tuple[type, tuple[str, float, float]]:
        return (type(self), (self.limit, self.value, self.maximum))


def _describe(limit: str, value: float, maximum: float) -> str:
    if limit == "cost":
        return f"cost ${value:.6f} > max_cost_usd ${maximum:.6f} (over by ${value - maximum:.6f})"
    if limit == "steps":
        return f"steps {value:g} > max_steps {maximum:g} (over by {value - maximum:g})"
    return f"elapsed {value:.3f}s > max_seconds {maximum:g}s (over by {value - maximum:.3f}s)"


@dataclass(frozen=True)
class Budget:
    """Limits for one run; ``None`` means no limit on that dimension."""

    max_cost_usd: float | None = None
    max_steps: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_cost_usd", "max_steps", "max_seconds"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"Budget({name}={value!r}): must be a non-negative number or None")

    def check(self, cost_usd: float, steps: int, elapsed_s: float) -> BudgetExceeded | None:
        """The first limit passed, as an exception to raise, or None."""
        if self.max_cost_usd is not None and cost_usd > self.max_cost_usd:
            return BudgetExceeded("cost", cost_usd, self.max_cost_usd)
        if self.max_steps is not None and steps > self.max_steps:
            return BudgetExceeded("steps", steps, self.max_steps)
        if self.max_seconds is not None and elapsed_s > self.max_seconds:
            return BudgetExceeded("seconds", elapsed_s, self.max_seconds)
        return None


class BudgetLeft(NamedTuple):
    """What a run may still spend (``Run.budget_left()``); None where its budget has no limit.
    A negative figure is an overshoot: the next LLM or tool call will raise."""

    cost_usd: float | None
    steps: int | None
    seconds: float | None
