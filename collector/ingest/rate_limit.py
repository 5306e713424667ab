"""The per-key ingestion rate limit (``AGENTWATCH_RATE_LIMIT_SPANS_PER_S``), shared by OTLP/HTTP and gRPC.

A request is refused (429 with ``Retry-After``) while its key is in debt, checked before its body
is decoded; what it brought is spent after, so one large request is let in and the next waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from agentwatch_platform.collector.ingest.otlp.errors import RateLimited


class RateLimiter:
    """Token bucket of spans per second per key; the burst is one second's worth."""

    def __init__(self, spans_per_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = spans_per_s
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill)

    def check(self, key: str) -> None:
        """Raise ``RateLimited`` while the key is in debt (before decoding its request)."""
        if self.rate <= 0:
            return
        tokens = self._refill(key)
        if tokens < 0:
            raise RateLimited(
                f"rate limit of {self.rate:g} spans/s per key exceeded (AGENTWATCH_RATE_LIMIT_SPANS_PER_S); retry later",
                retry_after=round(-tokens / self.rate, 3) or 0.001,
            )

    def spend(self, key: str, spans: int) -> None:
        if self.rate <= 0:
            return
        tokens = self._refill(key)
        self._buckets[key] = (tokens - spans, self._clock())

    def _refill(self, key: str) -> float:
        now = self._clock()
        tokens, last = self._buckets.get(key, (self.rate, now))
        tokens = min(self.rate, tokens + (now - last) * self.rate)
        self._buckets[key] = (tokens, now)
        return tokens
