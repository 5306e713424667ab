"""Query parameters shared by every ``/api`` router (the query API, alerts): the time window
and the agent/model filters, parsed the same way everywhere so that a bad value is the same
422 naming it on every endpoint."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Annotated

from fastapi import HTTPException, Query

__all__ = ["DEFAULT_RANGE_S", "Agent", "End", "Model", "Start", "parse_time", "time_window"]

DEFAULT_RANGE_S = 3600

Start = Annotated[
    str | None, Query(max_length=64, description="RFC 3339 time or epoch seconds; default: end minus one hour")
]
End = Annotated[str | None, Query(max_length=64, description="RFC 3339 time or epoch seconds; default: now")]
Agent = Annotated[str | None, Query(max_length=256)]
Model = Annotated[str | None, Query(max_length=256)]


def parse_time(name: str, value: str | None, default: float) -> float:
    """Epoch seconds from an RFC 3339 string or a number; naive times are UTC; 422 naming ``name``."""
    if value is None or value == "":
        return default
    try:
        seconds = float(value)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise HTTPException(
                422, f"{name}: expected an RFC 3339 time or epoch seconds, got {value[:64]!r}"
            ) from None
        seconds = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    if not math.isfinite(seconds):
        raise HTTPException(422, f"{name}: must be finite")
    return seconds


def time_window(start: str | None, end: str | None) -> tuple[float, float]:
    """``(start, end)`` in epoch seconds: end defaults to now, start to one hour before end."""
    stop = parse_time("end", end, time.time())
    return parse_time("start", start, stop - DEFAULT_RANGE_S), stop
