"""The collector's watermark: complete buckets are never revised, newer ones are flagged partial.

Spans stream into a real collector (uvicorn on 127.0.0.1, the real writer and store) the way an
agent's SDK sends them: each call arrives after its own duration plus an export delay. The
collector's clock is the test's, advanced a second per round, so nothing depends on how fast
this machine runs; each round waits until what was sent is stored, then reads the series.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
import uvicorn

from agentwatch_platform.collector.app import create_app
from agentwatch_platform.collector.ingest.freshness import Freshness
from tests.collector.ingest_helpers import Running, otlp_request, settings_for
from tests.support.poll import wait_until

STEP_S = 5


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _calls(starts_s: list[float], ended_s: float = 0.5) -> pa.Table:
    """Calls that started at ``starts_s`` and ended ``ended_s`` after."""
    ns = pa.array([int(s * 1e9) for s in starts_s], pa.timestamp("ns"))
    ends = pa.array([int((s + ended_s) * 1e9) for s in starts_s], pa.timestamp("ns"))
    return pa.table({"start_time": ns, "end_time": ends, "kind": pa.array(["llm"] * len(starts_s))})


def test_a_quiet_collector_waits_its_cold_delay() -> None:
    clock = Clock(1000.0)
    fresh = Freshness(clock=clock, warm_calls=3, cold_delay_s=60)
    assert fresh.state().complete_until == 940.0
    fresh.stored([1], _calls([990.0, 996.0, 998.0]))  # longest delay 10 s, three calls: warm
    assert fresh.state().complete_until == 1000.0 - (10 * 1.25 + 1)


def test_spans_in_flight_hold_the_watermark_back_and_late_ones_are_counted() -> None:
    clock = Clock(1000.0)
    fresh = Freshness(clock=clock, warm_calls=1)
    fresh.stored([1], _calls([999.0]))  # delay 1 s: watermark 1000 - 2.25
    fresh.accepted(2, _calls([900.0, 990.0]))
    assert fresh.state().complete_until == 900.0 and fresh.state().in_flight_spans == 2
    fresh.stored([2], _calls([900.0, 990.0]))
    state = fresh.state()
    assert state.in_flight_spans == 0 and state.late_spans == 0
    clock.t = 1001.0
    before = fresh.state().complete_until
    fresh.stored([3], _calls([500.0]))  # before the watermark given out: late; long over: a backfill
    assert fresh.state().late_spans == 1
    assert fresh.state().complete_until == 1001.0 - (10 * 1.25 + 1)  # the live call at 990 measured 10 s; 500 nothing
    assert before == fresh.state().complete_until


@contextlib.contextmanager
def _collector(tmp_path: Path, clock: Clock) -> Iterator[Running]:
    settings = settings_for(tmp_path / "data", flush_interval_s=0.02)
    app = create_app(settings, clock=clock)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=settings.port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="freshness-collector", daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), 120, "collector did not start", interval=0.02)
    assert thread.is_alive(), "collector did not start"
    try:
        yield Running(f"http://127.0.0.1:{settings.port}", settings, app)
    finally:
        server.should_exit = True
        thread.join(60)


def _send(client: httpx.Client, key: str, calls: list[tuple[float, float, int]]) -> None:
    spans = [
        {
            "span_id": os.urandom(8),
            "name": "chat sim-small",
            "start": int(start * 1e9),
            "end": int(end * 1e9),
            "attrs": {
                "agentwatch.span.kind": "llm",
                "gen_ai.request.model": "sim-small",
                "gen_ai.usage.input_tokens": n,
            },
        }
        for start, end, n in calls
    ]
    body = otlp_request(os.urandom(16), spans).SerializeToString()
    got = client.post(
        "/v1/traces", content=body, headers={"content-type": "application/x-protobuf", "Authorization": f"Bearer {key}"}
    )
    assert got.status_code == 200, got.text


def _stored(client: httpx.Client, key: str, expected: int) -> None:
    """Until the collector has stored what was sent (a condition, not a time)."""

    def stored() -> bool:
        status = client.get("/api/ingest", headers={"Authorization": f"Bearer {key}"}).json()
        return status["stored_spans"] >= expected and status["queued_spans"] == 0

    wait_until(stored, 120, f"the collector did not store the {expected} spans sent", interval=0.02)


@pytest.mark.slow  # 56 s under load 13; make quick leaves it out, make test runs it
def test_complete_buckets_are_never_revised_while_spans_stream_in(tmp_path: Path) -> None:
    rng = random.Random(7)
    t0 = float(int(time.time()) - 3600)  # an hour ago: far from the bounds on future spans
    clock = Clock(t0)
    calls = []  # (arrival, start, end, input tokens): ~3 calls a second, 0.2-6 s long, 0-5 s export delay
    for i in range(150):
        start = t0 + i / 3
        end = start + rng.uniform(0.2, 6.0)
        calls.append((end + rng.uniform(0.0, 5.0), start, end, rng.randint(1, 100)))
    seen: dict[float, float] = {}  # bucket start -> its value when first seen complete
    sent = 0
    with _collector(tmp_path, clock) as running, httpx.Client(base_url=running.url, timeout=30) as client:
        key = running.key("fresh", ["ingest", "read"])
        for second in range(1, 90):
            clock.t = t0 + second
            due = [(s, e, n) for arrival, s, e, n in calls if clock.t - 1 < arrival <= clock.t]
            if due:
                _send(client, key, due)
                sent += len(due)
            _stored(client, key, sent)
            series = client.get(
                "/api/timeseries",
                params={"metric": "input_tokens", "start": t0, "end": t0 + 80, "step_s": STEP_S},
                headers={"Authorization": f"Bearer {key}"},
            ).json()
            until = series["complete_until"]
            assert until <= clock.t
            for point in series["points"]:
                assert point["partial"] == (point["t"] + STEP_S > until)
                if not point["partial"]:
                    assert seen.setdefault(point["t"], point["value"]) == point["value"], (second, point)
        late = client.get("/api/freshness", headers={"Authorization": f"Bearer {key}"}).json()["late_spans"]
    assert sent == len(calls) and late == 0
    expected: dict[float, float] = {}
    for _, start, _, n in calls:
        bucket = t0 + (start - t0) // STEP_S * STEP_S
        expected[bucket] = expected.get(bucket, 0) + n
    assert len(seen) >= 10  # buckets were called complete while the stream went on
    assert all(seen[t] == expected.get(t, 0) for t in seen)


def test_in_process_alerts_lag_by_the_clock_until_arrivals_are_measured() -> None:
    clock = Clock(1000.0)
    fresh = Freshness(clock=clock, warm_calls=2)
    assert fresh.measured_lag() == 0.0  # cold: the clock, as before the watermark
    fresh.accepted(1, _calls([995.0]))
    assert fresh.measured_lag() == 5.0  # a request still on its way holds it back even cold
    fresh.stored([1], _calls([995.0]))
    fresh.stored([2], _calls([992.0]))
    assert fresh.measured_lag() == 8.0 * 1.25 + 1.0
