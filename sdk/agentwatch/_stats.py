"""The SDK's own counters, so that dropped spans and internal errors are never silent.

One process-wide ``Counters`` object; ``agentwatch.stats()`` returns a snapshot dict.
Increments take a lock: uncontended it costs tens of nanoseconds, and counts stay exact
when many agent threads end spans at once.

Every span handed to the export processor is in exactly one state, and a span changes state
in one ``update`` call (one lock), so any snapshot satisfies
``spans_ended == spans_exported + spans_failed + spans_pending``; spans refused at the
buffer are ``spans_dropped`` instead of ended.
"""

from __future__ import annotations

import logging
import os
import threading

logger = logging.getLogger("agentwatch")

NAMES = (
    "spans_started",  # spans opened by agentwatch (runs, steps, LLM and tool calls)
    "spans_ended",  # spans handed to the export processor (any tracer of our provider)
    "spans_exported",  # spans the collector accepted
    "spans_dropped",  # spans dropped because the export queue was full (or after shutdown)
    "spans_failed",  # spans lost because export failed after all retries (or the collector rejected them)
    "spans_pending",  # ended spans not yet settled: queued, or in an export request still in flight
    "export_requests",  # HTTP export attempts
    "export_retries",  # attempts that were retries
    "export_failures",  # batches given up on
    "internal_errors",  # bugs of ours caught before they reached the agent
    "redaction_errors",  # redact hooks that raised (the value was withheld)
    "unknown_models",  # cost lookups for models without a price (priced 0.0)
    "budget_exceeded",  # BudgetExceeded raised
    "feedback_sent",
    "feedback_failed",
)


class Counters:
    """Thread-safe named counters; ``add`` never raises."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(NAMES, 0)

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._values[name] += n

    def update(self, **deltas: int) -> None:
        """Several counters at once, atomically: how a span moves from one state to another."""
        with self._lock:
            for name, delta in deltas.items():
                self._values[name] += delta

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)

    def reset_after_fork(self) -> None:
        """A forked child counts from zero, with a fresh lock (a fork can copy it held).

        The parent's counts, its pending spans included, stay the parent's: the child's
        export queue starts empty, so its counters must too for the accounting to hold.
        """
        self._lock = threading.Lock()
        self._values = dict.fromkeys(NAMES, 0)


COUNTERS = Counters()
os.register_at_fork(after_in_child=COUNTERS.reset_after_fork)


def internal_error(what: str, exc: BaseException) -> None:
    """Log and count one of our own bugs; the agent carries on."""
    COUNTERS.add("internal_errors")
    logger.warning("agentwatch: internal error in %s: %r", what, exc, exc_info=exc)
