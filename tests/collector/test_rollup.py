"""The fast paths (hour and minute rollups, lean run merges) against figures computed straight
from the spans of a small seeded store.

The seed spreads runs over seven hours, in several inserts; one run's children arrive in an
insert before its root and its spans straddle an hour boundary; another's spans arrive in two
inserts within one hour. Ranges start off the hour so that every path (whole hours, the minutes
around them, an hour split between two buckets) is taken.
"""

from __future__ import annotations

import math
import random
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

import pytest

from agentwatch_api.schemas import TIMESERIES_METRICS, FeedbackIn
from agentwatch_platform.collector.query import cost as cost_query
from agentwatch_platform.collector.query import feedback as feedback_query
from agentwatch_platform.collector.query import metrics as metrics_query
from agentwatch_platform.collector.query import overview as overview_query
from agentwatch_platform.collector.query import ranges
from agentwatch_platform.collector.query import runs as runs_query
from agentwatch_platform.collector.storage.base import Store
from agentwatch_platform.collector.storage.maintenance import rebuild_totals
from agentwatch_platform.collector.storage.model import SpanRow
from agentwatch_platform.collector.storage.sql import metrics as metrics_sql
from agentwatch_platform.collector.storage.sql import runs as runs_sql
from agentwatch_platform.collector.storage.sql import scope as scope_sql
from tests.collector.factories import agent_run
from tests.collector.store_fixtures import forget_rollup

P = "r1"
T0 = (int(time.time()) // 3600 - 9) * 3600  # an hour boundary nine hours ago
QUANTILES = ("ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95")
Seed = dict[str, Any]


def _runs(rng: random.Random) -> list[list[SpanRow]]:
    runs = []
    t = T0 - 600.0
    while t < T0 + 7 * 3600:
        rows = agent_run(
            project=P,
            agent=rng.choice(("alpha", "beta", "gamma")),
            start_s=t,
            steps=rng.randint(1, 5),
            model=rng.choice(("sim-small", "sim-large")),
            cost_per_call=rng.choice((0.01, 0.02, 0.05)),
            tokens=(rng.randint(50, 500), rng.randint(5, 80)),
            failing_tools=rng.choice((0, 0, 1)),
            status=rng.choice(("ok", "ok", "ok", "error")),
            outcome=rng.choice(("success", "success", "failure", "")),
        )
        if rng.random() < 0.2:  # an agent without step spans: its steps are its LLM calls
            rows = [r for r in rows if r.kind != "step"]
        runs.append(
            [
                replace(r, ttft_s=rng.uniform(0.05, 0.9), tpot_s=rng.uniform(0.005, 0.05)) if r.kind == "llm" else r
                for r in rows
            ]
        )
        t += rng.uniform(240, 560)
    return runs


@pytest.fixture(scope="module")
def seed(module_store: Store) -> Seed:
    rng = random.Random(5)
    runs = _runs(rng)
    straddling = agent_run(
        project=P, agent="beta", start_s=T0 + 4 * 3600 - 2.5, steps=4, outcome="success", cost_per_call=0.07
    )
    split = agent_run(
        project=P, agent="alpha", start_s=T0 + 2 * 3600 + 1500, steps=3, model="sim-large", cost_per_call=0.04
    )
    module_store.insert_spans([r for r in straddling if r.kind != "run"])  # children first, across the hour boundary
    for i in range(0, len(runs), 9):
        module_store.insert_spans([r for run in runs[i : i + 9] for r in run])
    module_store.insert_spans([r for r in straddling if r.kind == "run"] + split[:4])
    module_store.insert_spans(split[4:])
    runs += [straddling, split]
    feedback: dict[str, list[float]] = defaultdict(list)
    for run in rng.sample(runs, 12) + [straddling]:
        score = rng.choice((0.0, 0.5, 1.0, None))
        feedback_query.add_feedback(
            module_store, P, run[0].trace_id, FeedbackIn(score=score, label="" if score is not None else "unrated")
        )
        if score is not None:
            feedback[run[0].trace_id].append(score)
    return {"rows": [r for run in runs for r in run], "feedback": feedback, "straddling": straddling[0].trace_id}


# --- figures straight from the spans -------------------------------------------------------------
def _quantile(values: list[float], level: float) -> float | None:
    """ClickHouse's ``quantile`` on few values: linear interpolation between the sorted values."""
    if not values:
        return None
    values = sorted(values)
    pos = level * (len(values) - 1)
    lo = math.floor(pos)
    return values[lo] + (values[min(lo + 1, len(values) - 1)] - values[lo]) * (pos - lo)


def _run(spans: list[SpanRow]) -> dict[str, Any] | None:
    roots = [s for s in spans if s.kind == "run" or s.parent_span_id == ""]
    if not roots:
        return None
    start, end = min(s.start_time_ns for s in spans), max(s.end_time_ns for s in spans)
    steps = sum(s.kind == "step" for s in spans) or sum(s.kind == "llm" for s in spans)
    status = (
        "budget"
        if any(s.budget_exceeded for s in spans)
        else "timeout"
        if any(s.is_timeout for s in roots)
        else ("error" if any(s.status_code == "error" for s in roots) else "ok")
    )
    return {
        "trace_id": spans[0].trace_id,
        "start_ns": start,
        "duration_s": max(end - start, 0) / 1e9,
        "status": status,
        "outcome": max(s.outcome for s in spans),
        "steps": steps,
        "cost_usd": sum(s.cost_usd for s in spans if s.kind != "run"),
        "total_tokens": sum(s.input_tokens + s.output_tokens for s in spans if s.kind != "run"),
        "start_time": start,  # (ns)
        "agent": max(s.agent_name for s in spans),
        "models": sorted({s.model for s in spans if s.model}) or [""],
    }


def runs_of(seed: Seed) -> list[dict[str, Any]]:
    by_trace: dict[str, list[SpanRow]] = defaultdict(list)
    for row in seed["rows"]:
        by_trace[row.trace_id].append(row)
    return [run for spans in by_trace.values() if (run := _run(spans))]


def reference(
    seed: Seed, start: float, end: float, step: float, group_by: str = "none"
) -> dict[tuple[int, str], dict[str, float | None]]:
    """Every figure but the TDigest quantiles per (bucket, group), from the spans themselves:
    call-level figures over the whole minutes covering [start, end) (a minute in the bucket it
    starts in), run-level ones over the runs that started in [start, end)."""
    start_ns, end_ns, step_ns = int(start * 1e9), int(end * 1e9), int(step * 1e9)
    lo, hi, last = math.floor(start / 60) * 60, math.ceil(end / 60) * 60, max(1, math.ceil((end - start) / step)) - 1
    calls: dict[tuple[int, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in seed["rows"]:
        minute = s.start_time_ns // 60_000_000_000 * 60
        if not lo <= minute < hi:
            continue
        key = (
            min((max(minute * 10**9, start_ns) - start_ns) // step_ns, last),
            {"none": "", "agent": s.agent_name, "model": s.model}[group_by],
        )
        c = calls[key]
        if s.kind != "run":
            c["cost_usd"] += s.cost_usd
            c["input_tokens"] += s.input_tokens
            c["output_tokens"] += s.output_tokens
        c["tool_calls"] += s.kind == "tool"
        c["tool_failures"] += s.kind == "tool" and s.status_code == "error"
        c["calls"] += s.kind in ("llm", "tool")
        c["timeouts"] += s.kind in ("llm", "tool") and s.is_timeout
        c["tool_cache_hits"] += s.kind == "tool" and s.tool_cache_hit
        c["llm_calls"] += s.kind == "llm"
        c["small_model_calls"] += s.kind == "llm" and s.attributes.get("agentwatch.llm.model_tier") == "small"
    runs: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for run in runs_of(seed):
        if start_ns <= run["start_ns"] < end_ns:
            groups = {"none": [""], "agent": [run["agent"]], "model": run["models"]}[group_by]
            for group in groups:
                runs[((run["start_ns"] - start_ns) // step_ns, group)].append(run)
    out: dict[tuple[int, str], dict[str, float | None]] = {}
    for key, c in calls.items():
        out[key] = {
            "cost_usd": c["cost_usd"],
            "input_tokens": c["input_tokens"],
            "output_tokens": c["output_tokens"],
            "tokens_per_s": c["output_tokens"] / step,
            "tool_calls": c["tool_calls"],
            "tool_failure_rate": c["tool_failures"] / c["tool_calls"] if c["tool_calls"] else None,
            "timeout_rate": c["timeouts"] / c["calls"] if c["calls"] else None,
            "tool_cache_hit_rate": c["tool_cache_hits"] / c["tool_calls"] if c["tool_calls"] else None,
            "small_model_share": c["small_model_calls"] / c["llm_calls"] if c["llm_calls"] else None,
        }
    for key, rs in runs.items():
        with_outcome = [r for r in rs if r["outcome"]]
        scores = [score for r in rs for score in seed["feedback"].get(r["trace_id"], [])]
        out.setdefault(key, {}).update(
            {
                "runs": len(rs),
                "run_latency_p50": _quantile([r["duration_s"] for r in rs], 0.5),
                "run_latency_p95": _quantile([r["duration_s"] for r in rs], 0.95),
                "error_rate": sum(r["status"] != "ok" for r in rs) / len(rs),
                "success_rate": sum(r["outcome"] == "success" for r in rs) / len(with_outcome)
                if with_outcome
                else None,
                "steps_per_run": sum(r["steps"] for r in rs) / len(rs),
                "max_steps": max(r["steps"] for r in rs),
                "max_run_cost_usd": max(r["cost_usd"] for r in rs),
                "feedback_score": sum(scores) / len(scores) if scores else None,
            }
        )
    for key, figures in out.items():
        successes = sum(r["outcome"] == "success" for r in runs.get(key, []))
        figures["cost_per_success_usd"] = figures.get("cost_usd", 0.0) / successes if successes else None
    return out


def span_quantiles(
    store: Store, start: float, end: float, step: float, group_by: str = "none"
) -> dict[tuple[int, str], dict[str, float | None]]:
    """TTFT/TPOT quantiles per (bucket, group) in one pass over the spans (no rollup)."""
    group = {"none": "''", "agent": "toString(agent_name)", "model": "toString(model)"}[group_by]
    rows = store.query(
        f"""SELECT least(intDiv(greatest(toInt64(toUnixTimestamp(toStartOfMinute(start_time))) * 1000000000, {{start_ns:Int64}})
                - {{start_ns:Int64}}, {{step_ns:Int64}}), {{last:Int64}}) AS bucket, {group} AS grp,
            quantilesTDigestIf(0.5, 0.95)(toFloat32(ifNull(ttft_s, 0)), kind = 'llm' AND ttft_s IS NOT NULL) AS ttft,
            quantilesTDigestIf(0.5, 0.95)(toFloat32(ifNull(tpot_s, 0)), kind = 'llm' AND tpot_s IS NOT NULL) AS tpot
        FROM spans WHERE project = {{project:String}}
          AND toStartOfMinute(start_time) >= toDateTime({{lo:Int64}}) AND toStartOfMinute(start_time) < toDateTime({{hi:Int64}})
        GROUP BY bucket, grp""",
        {
            "project": P,
            "start_ns": int(start * 1e9),
            "step_ns": int(step * 1e9),
            "last": max(1, math.ceil((end - start) / step)) - 1,
            "lo": math.floor(start / 60) * 60,
            "hi": math.ceil(end / 60) * 60,
        },
    )
    return {
        (r["bucket"], r["grp"]): {
            "ttft_p50": r["ttft"][0],
            "ttft_p95": r["ttft"][1],
            "tpot_p50": r["tpot"][0],
            "tpot_p95": r["tpot"][1],
        }
        for r in rows
    }


def expected(
    seed: Seed,
    store: Store,
    key: tuple[int, str],
    metric: str,
    start: float,
    end: float,
    step: float,
    group_by: str = "none",
) -> Any:
    """The figure ``metric`` of ``key`` as the spans give it (additive figures of an empty bucket are 0)."""
    if metric in QUANTILES:
        value = span_quantiles(store, start, end, step, group_by).get(key, {}).get(metric)
        value = None if value is None or math.isnan(value) else value
    else:
        value = reference(seed, start, end, step, group_by).get(key, {}).get(metric)
    if value is None and metric in metrics_query.ADDITIVE:
        return 0.0
    return value if value is None else pytest.approx(value, rel=1e-9, abs=1e-12)


# --- the tests -------------------------------------------------------------------------------
# First: a chDB process opens one directory at a time, and the module's store stays open after.
def test_upgrade_backfills_the_hour_rollup(store: Store) -> None:
    forget_rollup(store, "span_hours", 3)
    store.insert_spans(agent_run(start_s=time.time() - 7200, steps=2) + agent_run(start_s=time.time() - 300, steps=3))
    store.migrate()
    hours = "SELECT sum(llm_calls) AS calls, round(sum(cost_usd), 9) AS cost FROM span_hours WHERE project = 'p1'"
    assert store.query(hours)[0] == {"calls": 5, "cost": 0.05}
    store.insert_spans(agent_run(start_s=time.time() - 200, steps=1))  # and the view feeds it from now on
    assert store.query(hours)[0]["calls"] == 6


def test_upgrade_backfills_the_run_minutes(store: Store) -> None:
    forget_rollup(store, "run_minutes", 10)
    now = time.time()
    store.insert_spans(agent_run(start_s=now - 7200, outcome="success") + agent_run(start_s=now - 300, status="error"))
    store.migrate()
    minutes = "SELECT sum(runs) AS runs, sum(successes) AS ok, sum(failed_runs) AS failed FROM run_minutes WHERE project = 'p1'"
    assert store.query(minutes)[0] == {"runs": 2, "ok": 1, "failed": 1}
    store.insert_spans(agent_run(start_s=now - 200, steps=1))  # and the view feeds it from now on
    assert store.query(minutes)[0]["runs"] == 3


OVERVIEW = (T0 + 3 * 3600 + 1234.5, T0 + 6 * 3600 + 1234.5)  # and the 3 hours before it


def test_overview_matches_the_spans(module_store: Store, seed: Seed) -> None:
    start, end = OVERVIEW
    length = end - start
    got = overview_query.overview(module_store, P, start=start, end=end)
    for metric in TIMESERIES_METRICS:
        for bucket, side in ((0, "previous"), (1, "value")):
            value = getattr(got.figures[metric], side)
            assert value == expected(seed, module_store, (bucket, ""), metric, start - length, end, length), (
                metric,
                side,
            )
    assert got.figures["runs"].value > 10 and got.figures["feedback_score"].value is not None


@pytest.mark.parametrize(
    ("start", "step", "group_by", "metrics"),
    [
        (T0 + 1111.25, 7200, "none", TIMESERIES_METRICS),  # each bucket holds one whole hour and minutes around it
        (
            T0 + 3600,
            3600,
            "agent",
            ("cost_usd", "ttft_p95", "runs", "steps_per_run", "max_run_cost_usd", "feedback_score"),
        ),
        (T0 + 1111.25, 7200, "model", ("cost_usd", "input_tokens", "tpot_p50", "runs", "max_steps", "success_rate")),
        (
            T0 + 3000,
            300,
            "none",
            ("cost_usd", "ttft_p50", "runs", "max_run_cost_usd"),
        ),  # buckets under an hour: minutes only
    ],
)
def test_timeseries_matches_the_spans(
    module_store: Store, seed: Seed, start: float, step: int, group_by: str, metrics: tuple[str, ...]
) -> None:
    end = start + 6 * 3600
    for metric in metrics:
        series = metrics_query.timeseries(module_store, P, metric, start, end, step, group_by)
        assert {p.group for p in series.points} >= {
            "none": {""},
            "agent": {"alpha", "beta", "gamma"},
            "model": {"sim-small", "sim-large"},
        }[group_by]
        for point in series.points:
            key = (round((point.t - start) / step), point.group)
            assert point.value == expected(seed, module_store, key, metric, start, end, step, group_by), (metric, key)


@pytest.mark.parametrize(
    ("start", "step"),
    [(T0 + 1234.5, 3 * 3600), (T0 + 1111.25, 7200), (T0 + 1800.5, 3600), (T0 + 3600, 3600), (T0 + 3000, 300)],
)
def test_hours_and_minutes_give_the_same_figures(module_store: Store, seed: Seed, start: float, step: int) -> None:
    """Reading whole hours from span_hours is only a shortcut: forced on or off, the figures agree."""
    end = start + 6 * 3600
    params = {"project": P, "start_ns": int(start * 1e9), "end_ns": int(end * 1e9)} | ranges.rollup_params(
        start, end, step
    )
    got = {
        source: sorted(
            module_store.query(metrics_sql.span_metrics("model", "1", "1", source=source, quantiles=True), params),
            key=lambda r: (r["bucket"], r["grp"]),
        )
        for source in ("minutes", "hours")
    }
    assert len(got["hours"]) == len(got["minutes"]) >= 6 * 3600 // step
    for by_hours, by_minutes in zip(got["hours"], got["minutes"], strict=True):
        assert _no_nan(by_hours) == {
            k: pytest.approx(v, rel=1e-12) if k == "cost_usd" else v for k, v in _no_nan(by_minutes).items()
        }


def test_the_whole_hours_are_those_of_one_bucket_with_no_minute_cut_or_outside() -> None:
    """``ranges.whole_hours`` against its definition, over ranges and steps on and off the minute
    and the hour: an hour is read from span_hours exactly when every minute of it is a whole
    minute of the range, none is cut, and all are in one bucket."""
    rng = random.Random(38)
    for _ in range(300):
        start = T0 + rng.choice([0, 1800, 1234.5, 60 * rng.randrange(240), rng.uniform(0, 86_400)])
        step = rng.choice([60, 300, 1800, 3600, 7200, 3 * 3600, 86_400, rng.randrange(61, 20_000)])
        end = start + step * rng.randrange(1, 12) - rng.choice([0, 0, 7.5])
        params = {"start_ns": int(start * 1e9)} | ranges.rollup_params(start, end, step)
        if params["spans_only"]:
            continue
        cut = set(params["cut_minutes"])

        def bucket(t_s: int, params: dict[str, Any] = params, step: float = step) -> int:
            return min(max(0, math.floor((t_s * 1e9 - params["start_ns"]) / (step * 1e9))), params["last_bucket"])

        expected = {
            h
            for h in range(int(start) // 3600 * 3600, int(end) + 3600, 3600)
            if h >= params["lo_s"]
            and h + 3600 <= params["hi_s"]
            and not any(m in cut for m in range(h, h + 3600, 60))
            and bucket(h) == bucket(h + 3540)
        }
        got = set(range(params["wh_lo"], params["wh_hi"], 3600)) - set(params["not_whole_hours"])
        assert got == expected, (start, end, step)
        assert (ranges._rollup_source(params) == "hours") == bool(expected)


@pytest.mark.parametrize(
    ("start", "length", "step", "group_by", "agent"),
    [
        (OVERVIEW[0] - 3 * 3600, 6 * 3600, 3 * 3600, "none", None),  # the overview's: three minutes cut
        (T0 + 1111.25, 12 * 3600, 3 * 3600, "agent", None),
        (T0 + 3600, 6 * 3600, 3600, "none", "beta"),  # on the minute: every minute whole
        (T0 + 3 * 3600 + 1234.5, 8 * 3600, 4 * 3600, "none", None),  # the late root, a run across hours
    ],
)
def test_run_minutes_give_the_figures_of_the_heads(
    module_store: Store, seed: Seed, start: float, length: float, step: float, group_by: str, agent: str | None
) -> None:
    """Whole minutes from run_minutes, the cut ones and the runs without a root from the heads:
    the figures of the heads alone, runs crossing hours and roots arriving after their children included."""
    start_ns, end_ns, step_ns = int(start * 1e9), int((start + length) * 1e9), int(step * 1e9)
    params = {"project": P, "agent": agent, "model": None, "start_ns": start_ns, "end_ns": end_ns, "step_ns": step_ns}
    params |= ranges.head_minute_params(start_ns, end_ns, step_ns)
    assert "run_minutes" in metrics_query._plans({"runs"}, group_by, params)[0][0]
    got = {
        name: sorted(map(_no_nan, module_store.query(sql, params)), key=lambda r: (r["bucket"], r["grp"]))
        for name, sql in (
            (
                "minutes",
                metrics_sql.run_head_minutes(group_by, scope_sql.where(metrics_sql.RUN_MINUTE_FILTERS, params)),
            ),
            ("heads", metrics_sql.run_heads(group_by, scope_sql.where(runs_sql.RUN_HEAD_FILTERS, params))),
        )
    }
    assert got["minutes"] == got["heads"]
    assert sum(r["runs"] for r in got["heads"]) >= 10


def test_heads_are_read_as_they_are_where_cut_minutes_would_read_as_much() -> None:
    assert ranges.head_minute_params(0, 7200 * 10**9, 7 * 10**9) == {}  # buckets under a minute: most minutes cut
    assert ranges.head_minute_params(10**9, 7201 * 10**9, 3600 * 10**9) == {}  # an hour's overview: 3 cut of 120
    assert ranges.head_minute_params(10**9, 86401 * 10**9, 43200 * 10**9) == {
        "whole_lo_s": 60,
        "whole_hi_s": 86400,
        "edge_minutes": [0, 43200, 86400],
    }


def _no_nan(row: dict[str, Any]) -> dict[str, Any]:
    """Empty quantiles as None (NaN equals nothing, itself included)."""
    return {k: [None if math.isnan(x) else x for x in v] if isinstance(v, list) else v for k, v in row.items()}


def test_cost_breakdown_matches_the_spans(module_store: Store, seed: Seed) -> None:
    start, end = OVERVIEW
    got = cost_query.cost_breakdown(module_store, P, start=start, end=end, now=end)
    ref = reference(seed, start, end, end - start)[(0, "")]
    by_model = reference(seed, start, end, end - start, "model")
    assert got.total_usd == pytest.approx(ref["cost_usd"], rel=1e-9)
    assert {r.key: r.cost_usd for r in got.by_model} == {
        k[1]: pytest.approx(v["cost_usd"], rel=1e-9) for k, v in by_model.items() if v["cost_usd"]
    }
    by_day = module_store.query(  # days are the server's local days: grouped by ClickHouse, straight from the spans
        """SELECT toString(toDate(start_time)) AS day, sumIf(cost_usd, kind != 'run') AS cost FROM spans
        WHERE project = {p:String} AND toStartOfMinute(start_time) >= toDateTime({lo:Int64}) AND toStartOfMinute(start_time) < toDateTime({hi:Int64})
        GROUP BY day""",
        {"p": P, "lo": math.floor(start / 60) * 60, "hi": math.ceil(end / 60) * 60},
    )
    assert {r.key: r.cost_usd for r in got.by_day} == {
        r["day"]: pytest.approx(r["cost"], rel=1e-9) for r in by_day if r["cost"]
    }
    in_range = [r for r in runs_of(seed) if start * 1e9 <= r["start_ns"] < end * 1e9]
    top = sorted(in_range, key=lambda r: (-round(r["cost_usd"], 9), r["trace_id"]))[:10]
    assert [round(r.cost_usd, 9) for r in got.top_runs] == [round(r["cost_usd"], 9) for r in top]


@pytest.mark.parametrize(
    ("sort", "filters"),
    [
        ("-cost_usd", {}),
        ("steps", {"agent": "beta"}),
        ("-start_time", {"min_steps": 3}),
        ("-total_tokens", {"model": "sim-large", "min_cost": 0.05}),
    ],
)
def test_runs_list_matches_the_spans(module_store: Store, seed: Seed, sort: str, filters: dict[str, Any]) -> None:
    start, end = T0 + 1800.0, T0 + 5 * 3600 + 0.5
    page = runs_query.list_runs(module_store, P, start=start, end=end, sort=sort, limit=7, offset=2, **filters)
    runs = [r for r in runs_of(seed) if start * 1e9 <= r["start_ns"] < end * 1e9]
    runs = [
        r for r in runs if r["agent"] == filters.get("agent", r["agent"]) and r["steps"] >= filters.get("min_steps", 0)
    ]
    runs = [
        r
        for r in runs
        if filters.get("model", r["models"][0]) in r["models"] and r["cost_usd"] >= filters.get("min_cost", 0) - 1e-12
    ]
    assert page.total == len(runs) > 9
    field, sign = sort.removeprefix("-"), -1 if sort.startswith("-") else 1
    want = sorted(runs, key=lambda r: (sign * r[field], r["trace_id"]))[2:9]
    if field == "cost_usd":  # sums in another order: a near-tie may go either way, so compare the costs
        assert [round(r.cost_usd, 9) for r in page.items] == [round(r["cost_usd"], 9) for r in want]
    else:
        assert [r.trace_id for r in page.items] == [r["trace_id"] for r in want]
    by_id = {r["trace_id"]: r for r in runs}
    assert [(r.steps, round(r.cost_usd, 9), r.agent) for r in page.items] == [
        (by_id[r.trace_id]["steps"], round(by_id[r.trace_id]["cost_usd"], 9), by_id[r.trace_id]["agent"])
        for r in page.items
    ]


def test_a_run_split_across_inserts_and_hours_is_whole(module_store: Store, seed: Seed) -> None:
    run = runs_query.get_run(module_store, P, seed["straddling"])
    assert run is not None
    assert (run.run.steps, run.run.llm_calls, run.run.cost_usd) == (4, 4, pytest.approx(0.28))
    page = runs_query.list_runs(module_store, P, start=T0 + 4 * 3600 - 60, end=T0 + 4 * 3600, sort="-cost_usd")
    assert [(r.trace_id, r.steps, r.duration_s) for r in page.items][:1] == [
        (seed["straddling"], 4, pytest.approx(5.0))
    ]


def test_rebuilding_the_rollups_leaves_every_figure_unchanged(module_store: Store, seed: Seed) -> None:
    start, end = OVERVIEW
    before = overview_query.overview(module_store, P, start=start, end=end)
    hours = module_store.query(
        "SELECT count() AS n, sum(llm_calls) AS calls FROM span_hours WHERE project = {p:String}", {"p": P}
    )[0]
    rebuild_totals(module_store, since=T0 + 2 * 3600 + 1700.5, project=P)  # from inside an hour
    assert _flat(overview_query.overview(module_store, P, start=start, end=end)) == pytest.approx(
        _flat(before), rel=1e-12
    )  # sums in another order
    after = module_store.query("SELECT sum(llm_calls) AS calls FROM span_hours WHERE project = {p:String}", {"p": P})[0]
    assert after["calls"] == hours["calls"] == sum(r.kind == "llm" for r in seed["rows"])


def _flat(overview: Any) -> dict[str, float | None]:
    return {
        f"{name}.{side}": getattr(h, side) for name, h in overview.figures.items() for side in ("value", "previous")
    }
