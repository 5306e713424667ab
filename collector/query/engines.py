"""The LLM engines of a project: which are configured, registered or seen, and their metrics
and calls' timings over a range (``storage.sql.engines``)."""

from __future__ import annotations

import math
import time

from agentwatch_api.schemas import EngineInfo, EnginePoint, EngineSeries
from agentwatch_platform.collector.query.engine_calls import engine_call_timings
from agentwatch_platform.collector.query.ranges import bucket_count, range_ns
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.sql import engines as engines_sql

MAX_ENGINE_POINTS = 200_000
DEFAULT_ENGINE_BUCKETS = 200


def engines(
    store: Store, project: str, *, configured: dict[str, str] | None = None, now: float | None = None
) -> list[EngineInfo]:
    """Engines configured, registered at runtime, or seen in the metrics of the last day."""
    since = (time.time() if now is None else now) - 86_400
    urls = dict(configured or {}) | {
        r["engine"]: r["url"] for r in store.query(engines_sql.ENGINES_REGISTERED, {"project": project})
    }
    seen = {
        r["engine"]: r
        for r in store.query(engines_sql.ENGINES_SEEN, {"project": project, "since_ms": int(since * 1e3)})
    }
    return [
        EngineInfo(
            engine=name,
            url=urls.get(name, ""),
            model_names=seen.get(name, {}).get("model_names", []),
            last_scrape=seen.get(name, {}).get("last_scrape"),
        )
        for name in sorted(set(urls) | set(seen))
    ]


def engine_series(
    store: Store, project: str, engine: str, *, start: float, end: float, step_s: int | None = None
) -> EngineSeries:
    """Engine and GPU metrics per bucket: gauges averaged, counters at their last value."""
    range_ns(start, end)
    step = step_s if step_s is not None else max(1, math.ceil((end - start) / DEFAULT_ENGINE_BUCKETS))
    bucket_count(start, end, step)
    params = {
        "project": project,
        "engine": engine,
        "start_ms": int(start * 1e3),
        "end_ms": int(end * 1e3),
        "step_ms": step * 1000,
        "limit": MAX_ENGINE_POINTS,
    }
    rows = store.query(engines_sql.ENGINE_POINTS, params)
    points = [
        EnginePoint(t=start + r["bucket"] * step, metric=r["metric"], labels=r["labels"], value=r["value"])
        for r in rows
    ]
    return EngineSeries(
        engine=engine, points=points, calls=engine_call_timings(store.query(engines_sql.ENGINE_CALL_TIMINGS, params))
    )
