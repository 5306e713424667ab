"""The dashboard's computations: span trees, context-growth fits, engine shares, run graphs, metrics."""

from __future__ import annotations

import time

import pytest

from agentwatch_api.schemas import EnginePoint, SpanOut
from agentwatch_platform.dashboard import analysis, ui


def span(
    span_id: str, parent: str = "", *, kind: str = "step", start: float = 0.0, dur: float = 1.0, **kw: object
) -> SpanOut:
    return SpanOut(
        span_id=span_id,
        parent_span_id=parent,
        name=kw.pop("name", span_id),
        kind=kind,
        start_time=start,
        end_time=start + dur,
        duration_s=dur,
        status=kw.pop("status", "ok"),
        **kw,
    )


def react_run(steps: int, *, per_step: int, base: int = 500) -> list[SpanOut]:
    """A run whose LLM input grows by ``per_step`` tokens each step (0 = bounded context)."""
    spans = [span("run", kind="run", dur=steps + 1, agent="researcher", attributes={"gen_ai.agent.name": "researcher"})]
    for k in range(steps):
        spans.append(span(f"s{k}", "run", start=k, step_index=k))
        spans.append(
            span(
                f"l{k}",
                f"s{k}",
                kind="llm",
                start=k,
                dur=0.5,
                step_index=k,
                model="sim-large",
                input_tokens=base + per_step * k,
                output_tokens=50,
                cost_usd=0.001,
                ttft_s=0.1,
            )
        )
        spans.append(
            span(
                f"t{k}",
                f"s{k}",
                kind="tool",
                start=k + 0.5,
                dur=0.2,
                step_index=k,
                tool_name="search",
                status="error" if k == 2 else "ok",
            )
        )
    return spans


def test_tree_order_puts_children_under_parents_by_start_time() -> None:
    spans = [
        span("c2", "root", start=2),
        span("root", kind="run"),
        span("c1", "root", start=1),
        span("g", "c1", start=1.5),
        span("orphan", "missing", start=9),
    ]
    order = [(s.span_id, d) for s, d in analysis.tree_order(spans)]
    assert order == [("root", 0), ("c1", 1), ("g", 2), ("c2", 1), ("orphan", 0)]


def test_react_context_fits_quadratic_and_bounded_fits_linear() -> None:
    react = analysis.context_growth(react_run(12, per_step=400))
    bounded = analysis.context_growth(react_run(12, per_step=0))
    assert react.chosen == "quadratic" and round(react.tokens_added_per_call) == 400
    assert bounded.chosen == "linear" and abs(bounded.tokens_added_per_call) < 1
    assert react.calls == react.steps == list(range(12)) and react.cumulative[-1] == sum(
        500 + 400 * k for k in range(12)
    )


def test_context_growth_needs_three_calls() -> None:
    assert analysis.context_growth(react_run(2, per_step=100)).chosen == "too few calls"


def test_step_rows_sum_tokens_cost_and_failures_per_step() -> None:
    rows = analysis.step_rows(react_run(3, per_step=100))
    assert [r["input_tokens"] for r in rows] == [500, 600, 700]
    assert [r["failures"] for r in rows] == [0, 0, 1]
    assert rows[0]["llm_calls"] == 1 and rows[0]["tool_calls"] == 1 and rows[0]["ttft_s"] == 0.1


def test_engine_shares_split_the_client_call() -> None:
    spans = [
        span("l", kind="llm", dur=2.0, step_index=0, model="m"),
        span("e", "l", kind="llm", start=0.1, dur=1.8, name="llm_request", queue_s=0.5, prefill_s=0.3, decode_s=1.0),
    ]
    (row,) = analysis.engine_shares(spans)
    assert row["total_s"] == 2.0 and row["queue_s"] == 0.5 and abs(row["other_s"] - 0.2) < 1e-9
    assert [c.span_id for c in analysis.client_llm_calls(spans)] == ["l"]


def test_run_graph_counts_calls_failures_cost_and_handoffs() -> None:
    spans = react_run(4, per_step=0)
    spans.append(
        span(
            "sub",
            "s1",
            kind="other",
            start=1.1,
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "writer"},
        )
    )
    spans.append(span("sub-llm", "sub", kind="llm", start=1.2, model="sim-small", cost_usd=0.5, status="error"))
    graph = analysis.run_graph(spans)
    assert graph.nodes == {
        "agent:researcher": "agent",
        "llm:sim-large": "llm",
        "tool:search": "tool",
        "agent:writer": "agent",
        "llm:sim-small": "llm",
    }
    assert graph.edges[("agent:researcher", "llm:sim-large")].calls == 4
    assert graph.edges[("agent:researcher", "tool:search")].failures == 1
    assert graph.edges[("agent:researcher", "agent:writer")].calls == 1
    edge = graph.edges[("agent:writer", "llm:sim-small")]
    assert (edge.calls, edge.failures, edge.cost_usd) == (1, 1, 0.5)


def point(t: float, metric: str, value: float, **labels: str) -> EnginePoint:
    return EnginePoint(t=t, metric=metric, value=value, labels=labels)


def test_counter_rate_handles_suffix_labels_and_resets() -> None:
    pts = [
        point(0, "vllm:prompt_tokens_total", 0, model_name="a"),
        point(10, "vllm:prompt_tokens_total", 100, model_name="a"),
        point(20, "vllm:prompt_tokens_total", 30, model_name="a"),
        point(0, "vllm:prompt_tokens", 0, model_name="b"),
        point(10, "vllm:prompt_tokens", 50, model_name="b"),
    ]
    assert analysis.counter_rate(pts, ["vllm:prompt_tokens"]) == {10: 15.0, 20: 3.0}
    assert analysis.counter_increase(pts, ["vllm:prompt_tokens_total"]) == 180


def test_histogram_distribution_and_quantiles() -> None:
    now = time.time()
    pts = []
    for t, counts in ((now, (0, 0, 0)), (now + 10, (10, 90, 100))):
        for le, c in zip(("0.1", "1", "+Inf"), counts, strict=True):
            pts.append(point(t, "vllm:time_to_first_token_seconds_bucket", c, le=le))
    dist = analysis.histogram_distribution(pts, "vllm:time_to_first_token_seconds")
    assert dist.counts == [10, 80, 10] and dist.total == 100
    # a histogram knows the bucket a percentile lies in, not a point inside it
    assert dist.quantile_bucket(0.05) == (0.0, 0.1)
    assert dist.quantile_bucket(0.5) == (0.1, 1.0)
    assert dist.quantile_bucket(0.99) == (1.0, float("inf"))


def test_engine_percentiles_at_the_resolution_of_their_data() -> None:
    """Every call took 0.2-0.33 ms and the engine's first queue-time bucket ends at 300 ms: the
    histogram says "<= 300 ms", never an interpolated 150 ms; the calls' own spans say 0.26 ms."""
    from agentwatch_platform.dashboard import engine_figures

    dist = analysis.Distribution([0.3, 1.0, float("inf")], [12, 0, 0])
    assert engine_figures.percentiles(dist, None, None, 0) == "p50 ≤ 300 ms · p95 ≤ 300 ms (histogram buckets)"
    assert engine_figures.percentiles(dist, 0.00026, 0.00033, 12) == (
        "p50 0.26 ms · p95 0.33 ms (from the engine spans of 12 calls)"
    )
    assert engine_figures.bucket_range((0.3, 1.0)) == "300 ms–1.00 s"
    assert engine_figures.bucket_range((1.0, float("inf"))) == "> 1.00 s"
    assert engine_figures.bucket_range(None) == "–"


def test_gauge_series_sums_or_averages_label_sets() -> None:
    pts = [
        point(1, "vllm:num_requests_running", 2, model_name="a"),
        point(1, "vllm:num_requests_running", 3, model_name="b"),
    ]
    assert analysis.gauge_series(pts, ["vllm:num_requests_running"]) == {1: 5.0}
    assert analysis.gauge_series(pts, ["vllm:num_requests_running"], how="mean") == {1: 2.5}


def calls_with_inputs(inputs: list[int]) -> list[SpanOut]:
    return [span(f"l{i}", kind="llm", start=i, step_index=i // 2, input_tokens=n) for i, n in enumerate(inputs)]


def test_growth_fit_on_recorded_reference_agent_runs() -> None:
    """Input tokens per call recorded from the reference agent (two calls per step)."""
    react = [411, 598, 870, 1138, 1410, 1527, 1799, 1831, 2103, 2265, 1816]
    evolving_report = [429, 585, 857, 548, 820, 794, 1066, 658, 930, 719, 991, 911, 409]
    assert analysis.context_growth(calls_with_inputs(react)).chosen == "quadratic"
    assert analysis.context_growth(calls_with_inputs(evolving_report)).chosen == "linear"


def test_histogram_keeps_what_was_counted_before_an_engine_restart() -> None:
    """1,108 requests, the engine restarting after the first 764: all 1,108 are counted (as
    Prometheus's increase() counts across a reset), not only the 344 after the restart."""
    pts = []
    for t, counts in ((0, (0, 0)), (10, (500, 764)), (20, (3, 4)), (30, (300, 344))):
        for le, c in zip(("1", "+Inf"), counts, strict=True):
            pts.append(point(t, "vllm:e2e_request_latency_seconds_bucket", c, le=le))
    dist = analysis.histogram_distribution(pts, "vllm:e2e_request_latency_seconds")
    assert dist.total == 1108 and dist.counts == [800, 308]
    assert all(float(c).is_integer() for c in dist.counts)


def test_engine_lines_break_where_scrapes_stopped() -> None:
    from agentwatch_platform.dashboard.svg_charts import from_readings, segments, time_chart
    from tests.dashboard.support import svg_of

    values = {0.0: 1.0, 2.0: 2.0, 4.0: 3.0, 6.0: 2.0, 60.0: 1.0, 62.0: 1.0}  # down between 6 and 60 s
    assert [[v for _, v in part] for part in segments(values)] == [[1.0, 2.0, 3.0, 2.0], [1.0, 1.0]]
    (line,) = from_readings({"running": values})
    assert [v for _, v in line.points] == [1.0, 2.0, 3.0, 2.0, None, 1.0, 1.0]  # nothing drawn across the gap
    drawn = svg_of(time_chart([line], "Requests", "requests", ui.fmt))
    (path,) = drawn.svg.iter("{http://www.w3.org/2000/svg}path")
    assert path.get("d", "").count("M") == 2  # two pieces of line


def test_engine_chart_axes_stay_readable() -> None:
    from agentwatch_platform.dashboard.svg_charts import from_readings, time_chart
    from tests.dashboard.support import svg_of

    zeros = svg_of(time_chart(from_readings({"preemptions": {0.0: 0.0, 2.0: 0.0}}), "Preemptions", "per s", ui.fmt))
    assert "0" in zeros.texts() and "1 per s" in zeros.texts()  # from 0 to 1, not [0, 0] whose ticks read NaN
    fractions = svg_of(time_chart(from_readings({"running": {0.0: 0.3, 2.0: 0.1}}), "Requests", "requests", ui.fmt))
    assert "0.3 requests" in fractions.texts() and not any("m" in t.split()[0] for t in fractions.texts() if t != "UTC")
    assert "running: 0.3 requests" in fractions.tips[0]  # hover names the series and its value, unit as the cards'


def test_time_charts_keep_the_metric_in_its_domain_and_say_each_buckets_values() -> None:
    from agentwatch_platform.dashboard.svg_charts import Line, bar_chart, time_chart
    from tests.dashboard.support import svg_of

    rates = svg_of(time_chart([Line("error", [(0.0, 0.2), (60.0, 0.9)])], "Errors", "ratio", ui.fmt))
    shown = [t for t in rates.texts() if t.endswith("%")]
    assert shown and max(float(t.split()[0]) for t in shown) <= 100.0  # a rate axis never passes 100 %
    score = svg_of(time_chart([Line("score", [(0.0, -1.0), (60.0, 1.0)])], "Score", "", ui.fmt, score=True))
    assert any(t.startswith("-") for t in score.texts())  # a score may be negative: the axis follows it
    stacked = svg_of(
        time_chart(
            [Line("a", [(0.0, 1.0), (60.0, 2.0)]), Line("b", [(0.0, 3.0), (60.0, None)])],
            "Cost",
            "USD",
            ui.fmt,
            stacked=True,
        )
    )
    assert stacked.legend == ["a", "b"] and len(list(stacked.svg.iter("{http://www.w3.org/2000/svg}rect"))) == 3
    assert stacked.tips[0].split("\n")[1:] == ["a: $1.00", "b: $3.00"] and stacked.tips[1].endswith("a: $2.00")
    assert "No data" in time_chart([Line("a", [(0.0, None)])], "Empty", "USD", ui.fmt)
    bars = svg_of(bar_chart(["<model>", "m2"], [0.5, 2.0], "By model", "USD", ui.fmt))
    assert bars.tips == ["<model>\n$0.50", "m2\n$2.00"] and "<model>" in bars.texts()  # escaped, not markup


def test_engine_shares_keep_one_row_per_call_of_a_step() -> None:
    spans = [span(f"l{i}", kind="llm", start=i, dur=0.5, step_index=0, model="m", queue_s=0.1) for i in range(3)]
    rows = analysis.engine_shares(spans)
    assert [r["call"] for r in rows] == ["1. step 0 · m", "2. step 0 · m", "3. step 0 · m"]


def test_charts_are_drawn_unvalidated_and_the_tests_still_catch_a_bad_spec() -> None:
    import altair as alt
    import jsonschema
    import pandas as pd
    import pytest

    from agentwatch_platform.dashboard.run_charts import unchecked
    from tests.dashboard.support import valid_vega_lite

    def bars() -> alt.Chart:
        return alt.Chart(pd.DataFrame({"k": ["a", "b"], "v": [1.0, 2.0]})).mark_bar().encode(x="k:N", y="v:Q")

    drawn = unchecked(bars())
    assert drawn.to_dict() == bars().to_dict()  # the same spec
    drawn.mark = "no such mark"
    drawn.to_dict()  # not validated when the dashboard draws it...
    with pytest.raises(jsonschema.ValidationError):
        valid_vega_lite(drawn.to_dict())  # ...but the page tests check every spec they receive


@pytest.mark.parametrize("width", [320, 480, 640, 1100])
def test_a_30_day_axis_keeps_its_dates_clear_of_utc(width: int) -> None:
    """The last date ran into the axis' "UTC" (12-03UTC) on a 30-day range."""
    from agentwatch_platform.dashboard import svg_charts
    from tests.dashboard.support import svg_of

    end = 1_796_515_200.0  # a midnight
    points = [(end - 30 * 86_400 + i * 43_200, float(i % 7)) for i in range(61)]
    block = svg_charts.time_chart([svg_charts.Line("cost", points)], "Cost per day", "USD", ui.fmt, width=width)
    svg = svg_of(block).svg
    texts = [t for t in svg.iter("{http://www.w3.org/2000/svg}text") if t.get("y") == str(svg_charts.HEIGHT - 8)]
    utc = next(t for t in texts if t.text == "UTC")
    utc_left = float(utc.get("x")) - svg_charts.CHAR_W * 3
    dates = [t for t in texts if t is not utc]
    assert len(dates) >= 2
    gap = svg_charts.CHAR_W  # a space between the last date and "UTC"
    assert all(float(t.get("x")) + svg_charts.CHAR_W * len(t.text) / 2 <= utc_left - gap for t in dates)


def test_the_engine_view_keeps_every_calls_label_whole() -> None:
    """At 20 px a call Vega dropped every second label as overlapping and cut the rest at 180 px."""
    from agentwatch_platform.dashboard import run_charts

    rows = [
        {
            "call": f"{i}. step {i} · sim-large-with-a-long-name",
            "queue_s": 0.1,
            "prefill_s": 0.2,
            "decode_s": 1.0,
            "other_s": 0.0,
        }
        for i in range(1, 41)
    ]
    spec = run_charts.shares_chart(rows).to_dict(validate=False)
    axis = spec["encoding"]["y"]["axis"]
    assert axis["labelLimit"] == 0 and axis["labelOverlap"] is False
    assert spec["height"] >= 24 * len(rows)
