"""Each page under Streamlit's AppTest, against the live collector seeded with reference-agent runs."""

from __future__ import annotations

import json
import math
import time

import pytest
from streamlit.testing.v1 import AppTest

from agentwatch_platform.dashboard import trace, ui
from agentwatch_platform.reference_agent.keys import project_key
from tests.dashboard.support import (
    APP,
    SeededStack,
    Table,
    chart,
    dashboard_env,
    metrics,
    money,
    svg_charts,
    tables,
    valid_vega_lite,
)

PAGES = [
    "views/overview.py",
    "views/runs.py",
    "views/run_detail.py",
    "views/cost.py",
    "views/engine.py",
    "views/alerts.py",
]


@pytest.fixture
def app(seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    for name, value in dashboard_env(seeded, AGENTWATCH_DASHBOARD_OPEN="1").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENTWATCH_DASHBOARD_PASSWORD", raising=False)
    return AppTest.from_file(str(APP), default_timeout=60).run()  # switch_page needs one run first


def page(at: AppTest, path: str, **query: str) -> AppTest:
    at.query_params.update(query)
    at.switch_page(path).run()
    return drawn(at)


def drawn(at: AppTest) -> AppTest:
    """The run had no exception, every Vega-Lite chart's spec is valid (the dashboard draws without
    Altair's validation) and every SVG chart is well-formed SVG (``svg_charts`` parses it)."""
    assert not at.exception, [e.value for e in at.exception]
    for element in at.get("vega_lite_chart"):
        valid_vega_lite(json.loads(element.proto.spec))
    assert all(c.svg is not None or not c.tips for c in svg_charts(at))
    return at


def text(at: AppTest) -> str:
    return "\n".join(
        str(e.value)
        for kind in ("markdown", "caption", "info", "warning", "error", "success")
        for e in getattr(at, kind)
    )


def test_overview_headlines_match_the_stored_runs(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/overview.py")
    figures = seeded.get("/api/overview")["figures"]
    shown = metrics(at)
    assert shown["Runs"] == str(seeded.runs)
    assert shown["Cost"] == ui.fmt(figures["cost_usd"]["value"], "USD")
    assert shown["Steps / run"] == ui.fmt(figures["steps_per_run"]["value"], "")
    assert shown["Task success rate"].endswith("%") and shown["TTFT p50"].endswith(("ms", " s"))
    charts = svg_charts(at)  # SVG, as the sparklines: no chart library to load on the overview
    assert len(charts) == 5 and not at.get("vega_lite_chart") and all(c.svg is not None for c in charts)
    daily = next(c for c in charts if c.title.startswith("Cost per day"))
    assert daily.legend == ["cost"] and len(daily.tips) >= 28  # a bar per day of this month and the last
    assert shown["Month to date"] == ui.fmt(seeded.get("/api/cost")["month_to_date_usd"], "USD")
    assert "Projected month end" in shown
    cost = next(c for c in charts if c.title.startswith("Cost per bucket, by model"))
    assert set(cost.legend) == {"sim-large", "sim-small"} and cost.tips  # a colour per model; a hover text per bucket
    assert all(t.endswith("UTC") or "$" in t for tip in cost.tips for t in tip.split("\n"))
    assert ui.OPEN_MODE_BANNER in [w.value for w in at.warning]


def test_overview_counts_refused_requests_apart_and_says_what_each_figure_counts(
    app: AppTest, seeded: SeededStack
) -> None:
    at = page(app, "views/overview.py")
    overview = seeded.get("/api/overview")
    assert metrics(at)["Refused requests"] == f"{overview['refused_runs']:,}"
    body = "".join(e.proto.body for e in at.get("html"))
    assert "runs started in the range" in body and "success / runs with an outcome" in body
    assert "refused before any work: not runs" in body and 'href="runs?outcome=refused"' in body
    listed = page(app, "views/runs.py", outcome="refused")  # the card's link
    assert listed.selectbox(key="runs_outcome").value == "refused"


def test_overview_filters_by_model(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/overview.py")
    assert set(at.selectbox(key="aw_model").options) == {ui.ALL, "sim-large", "sim-small"}
    at.selectbox(key="aw_model").set_value("sim-small").run()
    expected = seeded.get("/api/overview", model="sim-small")["figures"]["cost_usd"]["value"]
    assert not at.exception and metrics(at)["Cost"] == ui.fmt(expected, "USD")


def open_more_filters(at: AppTest, open_: bool = True) -> None:
    """Opens (or closes) the runs page's More filters popover, whose widgets are drawn only while
    open. AppTest does not keep a popover open across runs as the browser does: open it again."""
    at.session_state["runs_more"] = open_
    at.run()


def more_filter(at: AppTest, key: str, value: object) -> None:
    """Sets a widget in the runs page's More filters popover, as a user does in the open popover."""
    open_more_filters(at)
    widget = at.selectbox(key=key) if key == "runs_size" else at.text_input(key=key)
    widget.set_value(value).run()


def test_runs_page_pages_sorts_and_links_each_run(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/runs.py")
    more_filter(at, "runs_size", 5)
    first = tables(at)["runs_table"]
    assert len(first.ids) == 5 and f"of {seeded.runs:,}" in text(at)
    assert tables(at)["runs_table"].pager == [1, 2]  # the table's pager: first, previous, next, last
    at.session_state["runs_page"] = 2  # as its Next button sets it (tests/dashboard/test_tables clicks it)
    at.run()
    second = tables(at)["runs_table"]
    assert len(second.ids) == seeded.runs - 5 and not set(second.ids) & set(first.ids)
    at.selectbox(key="runs_sort").set_value("Cost").run()
    by_cost = tables(at)["runs_table"]
    expected = seeded.get("/api/runs", sort="-cost_usd", limit=5, offset=5)["items"]  # still the second page
    assert by_cost.ids == [r["trace_id"] for r in expected]
    assert by_cost.column("cost") == [ui.fmt(r["cost_usd"], "USD") for r in expected]
    assert by_cost.sort == ("cost", True) and by_cost.column("trace_id") == by_cost.ids
    assert all(href == f"./run?run={tid}" for href, tid in zip(by_cost.hrefs, by_cost.ids, strict=True))


def test_runs_page_cost_and_step_bounds_are_typed_and_checked(app: AppTest, seeded: SeededStack) -> None:
    runs = seeded.get("/api/runs", limit=50, sort="-cost_usd")["items"]
    at = page(app, "views/runs.py")
    assert "runs_min_cost" not in [w.key for w in at.text_input]  # drawn only while the popover is open
    more_filter(at, "runs_min_cost", f"{runs[1]['cost_usd']:.9f}")  # the two most expensive
    two = {r["trace_id"] for r in runs if r["cost_usd"] >= runs[1]["cost_usd"]}
    assert set(tables(at)["runs_table"].ids) == two
    open_more_filters(at, False)  # closed, the bound still filters
    assert "runs_min_cost" not in [w.key for w in at.text_input] and set(tables(at)["runs_table"].ids) == two
    at.run()  # and on the next run too (Streamlit drops the state of widgets not drawn)
    assert set(tables(at)["runs_table"].ids) == two
    open_more_filters(at)
    assert at.text_input(key="runs_min_cost").value == f"{runs[1]['cost_usd']:.9f}"
    more_filter(at, "runs_min_cost", "")
    more_filter(at, "runs_max_steps", "lots")  # not a number: said so, the filter ignored
    assert not at.exception and any("'lots' is not a whole number" in e.value for e in at.error)
    assert len(tables(at)["runs_table"].ids) == seeded.runs
    open_more_filters(at, False)  # the typo is still said with the popover closed
    assert any("'lots' is not a whole number" in e.value for e in at.error)
    steps = sorted(r["steps"] for r in runs)
    more_filter(at, "runs_max_steps", str(steps[0]))
    assert set(tables(at)["runs_table"].ids) == {r["trace_id"] for r in runs if r["steps"] <= steps[0]}


def test_runs_page_filters_by_status(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/runs.py")
    at.selectbox(key="runs_status").set_value("ok").run()
    expected = seeded.get("/api/runs", status="ok")["total"]
    if expected:
        assert set(tables(at)["runs_table"].column("status")) == {"ok"}
    else:
        assert "No runs match" in text(at)


def _runs_by_mode(seeded: SeededStack) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for run in seeded.get("/api/runs", limit=50, sort="-steps")["items"]:
        detail = seeded.get(f"/api/runs/{run['trace_id']}")
        root = next(s for s in detail["spans"] if s["kind"] == "run")
        mode = json.loads(root["attributes"].get("agentwatch.run.tags", "[]"))[0]
        found.setdefault(mode, detail)
    return found


def view(at: AppTest, name: str) -> AppTest:
    at.radio(key="run_view").set_value(name).run()
    return drawn(at)


def test_run_detail_shows_waterfall_steps_growth_engine_and_graph(app: AppTest, seeded: SeededStack) -> None:
    runs = _runs_by_mode(seeded)
    react = runs["react"]
    at = page(app, "views/run_detail.py", trace_id=react["run"]["trace_id"])
    shown = metrics(at)
    assert shown["Steps"] == str(react["run"]["steps"]) and shown["LLM calls"] == str(react["run"]["llm_calls"])
    assert shown["Cost (USD)"] == ui.fmt(react["run"]["cost_usd"], "USD")
    assert f"Trace {react['run']['trace_id']}" in text(at) and not at.text_input  # shown, not asked for
    # An engine span whose client span was stored first joins the run's trace a moment later
    # (collector.ingest.engine_join): the count shown lies between the counts fetched before and after.
    (tree,) = [t for key, t in tables(at).items() if key.startswith("tree-")]
    assert not at.get("plotly_chart") and not at.get("vega_lite_chart")  # the trace view loads no chart library
    after = seeded.get(f"/api/runs/{react['run']['trace_id']}")
    assert set(tree.ids) <= {s["span_id"] for s in after["spans"]}
    assert len(react["spans"]) <= len(tree.ids) <= len(after["spans"])
    run_row = tree.rows[0]  # the run's own bar spans the whole timeline
    assert run_row["span"].startswith(trace.ICONS["run"]) and run_row["start"] == "+0.000 s" and tree.depths[0] == 0
    assert tree.bars[0]["timeline"][:2] == [0.0, 1.0] and max(tree.depths) >= 2  # run > step > call
    assert all(0 <= b["timeline"][0] and b["timeline"][0] + b["timeline"][1] <= 1 + 1e-9 for b in tree.bars)
    assert all(cell.startswith("+") and " to +" in cell for cell in tree.column("timeline"))  # each bar's hover
    steps = tables(view(at, "Steps"))["steps_table"]
    llm = [s for s in react["spans"] if s["kind"] == "llm"]
    assert sum(int(c.replace(",", "")) for c in steps.column("input")) == sum(s["input_tokens"] for s in llm)
    assert steps.labels[:4] == ["step", "LLM calls", "tool calls", "input tokens"]  # words, not column names
    assert at.query_params["view"] == "steps"  # a reload or a shared link opens Steps again
    assert "Fitted growth: quadratic" in text(view(at, "Context growth"))
    body = text(view(at, "Engine"))
    assert "queue:" in body and "decode:" in body  # the engine's spans joined the trace
    edges, nodes = chart(view(at, "Graph"))[1]
    assert {"research-agent", "sim-large"} <= set(nodes["name"]) and edges["label"].str.contains(
        r"^[\d,]+ calls?\b"
    ).all()
    # the Spans table too may hold an engine span joined after the first fetch (CI: 37 rows, 36 fetched before)
    assert len(react["spans"]) <= len(tables(view(at, "Spans"))["spans_table"].ids) <= len(after["spans"])
    iterative = runs["iterative"]
    at = page(at, "views/run_detail.py", trace_id=iterative["run"]["trace_id"])
    assert "Fitted growth: linear" in text(view(at, "Context growth"))


def test_run_detail_unknown_trace_is_a_message(app: AppTest) -> None:
    at = page(app, "views/run_detail.py", trace_id="0" * 32)
    assert any("Not found" in w.value for w in at.warning)


def test_cost_page_totals_levers_and_self_hosted_cost(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/cost.py")
    cost = seeded.get("/api/cost")
    shown = metrics(at)
    assert shown["Cost, last hour (USD)"] == ui.fmt(cost["total_usd"], "USD") and cost["total_usd"] > 0
    projected = float(shown["Projected month (USD)"].lstrip("$").replace(",", ""))
    assert projected == pytest.approx(cost["projected_month_usd"], rel=0.05)  # it moves with the clock
    assert shown["LLM calls"] == f"{cost['levers']['llm_calls']:,}"
    savings = tables(at)["cost_savings"]  # one row per lever, the API's figures
    saved = [money(cell) for cell in savings.column("saving")]
    assert saved == pytest.approx([lv["saving_usd"] for lv in cost["savings"]["levers"]], abs=1e-6)
    assert cost["savings"]["levers"][1]["lever"] == "routing" and cost["savings"]["levers"][1]["saving_usd"] > 0
    assert all(f"**{title}** — " in text(at) for title in ("Caching", "Routing", "Degradation", "Rate limiting"))
    assert all(f"Formula: {lv['basis']}." in text(at) for lv in cost["savings"]["levers"])  # one line each
    assert not _cost_tables(at)  # drawn when asked for only
    at.toggle(key="cost_tables").set_value(True).run()
    assert [sum(money(c) for c in t.column("cost_usd")) for t in _cost_tables(at)] == pytest.approx(
        [cost["total_usd"]] * 3, abs=1e-5
    )  # model, agent, day
    at.text_input(key="cost_gpu_hour").set_value("2.5").run()
    assert not at.exception and metrics(at)["GPU-hour price (USD)"] == "$2.50"
    at.text_input(key="cost_gpu_hour").set_value("cheap").run()  # said, and no self-hosted cost drawn
    assert any("'cheap' is not a price in USD" in e.value for e in at.error) and "GPU-hour price (USD)" not in metrics(
        at
    )


def _cost_tables(at: AppTest) -> list[Table]:
    return [t for key, t in tables(at).items() if key.startswith("cost_by_")]


def test_cost_page_levers_under_a_model_filter_cover_the_runs_that_used_it(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/cost.py")
    at.selectbox(key="aw_model").set_value("sim-large").run()
    levers = seeded.get("/api/cost", model="sim-large")["levers"]
    assert 0 < levers["small_model_share"] < 1  # was 0.0 %: one model's own calls, never the small one
    assert not at.exception and metrics(at)["Calls routed to the small model"] == ui.fmt(
        levers["small_model_share"], "ratio"
    )
    assert "every call of the runs that used sim-large" in text(at)


def test_cost_page_what_if_shows_the_apis_estimate(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/cost.py")
    assert "Change (USD)" not in metrics(at)  # estimated only while its expander is open
    at.session_state["whatif_open"] = True  # as a click on the expander sets it
    at.run()
    at.selectbox(key="whatif_policy").set_value("cap_steps").run()
    at.session_state["whatif_open"] = True  # AppTest does not keep an expander open across runs as a browser does
    at.run()
    at.number_input(key="whatif_cap").set_value(2).run()
    at.session_state["whatif_open"] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="whatif_policy").value == "cap_steps" and at.number_input(key="whatif_cap").value == 2
    at.session_state["whatif_open"] = False  # closed: nothing estimated, and what was set is kept
    at.run()
    at.run()
    assert "Change (USD)" not in metrics(at) and "whatif_cap" not in [w.key for w in at.number_input]
    at.session_state["whatif_open"] = True
    at.run()
    assert at.selectbox(key="whatif_policy").value == "cap_steps" and at.number_input(key="whatif_cap").value == 2
    expected = seeded.get("/api/whatif", policy="cap_steps", cap=2)
    assert expected["runs"] == seeded.runs and expected["change_usd"] < 0  # the seeded runs take more than 3 steps
    assert metrics(at)["Change (USD)"] == ui.fmt(expected["change_usd"], "USD")


def test_engine_page_shows_load_rates_and_distributions(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/engine.py")
    at.selectbox(key="aw_range").set_value("Last 15 minutes").run()  # 4.5 s buckets: before, during, after the traffic
    assert not at.exception, [e.value for e in at.exception]
    shown = metrics(at)
    assert shown["Prompt tokens/s (mean)"].endswith("tok/s") and shown["Prompt tokens/s (mean)"] != "0.0 tok/s"
    assert shown["Prefix-cache hit rate"].endswith("%")
    titles = [c.title for c in svg_charts(at)]
    assert any(t.startswith("Time to first token (engine):") for t in titles) and "Token throughput" in titles, titles
    assert not at.get("plotly_chart") and not at.get("vega_lite_chart")  # SVG, as the overview's: no chart library
    points = seeded.get("/api/engine/metrics", engine="sim-engine")["points"]
    if any(p["metric"].startswith("gpu:") for p in points):  # a machine with an NVIDIA GPU
        assert any(label.startswith("gpu:utilization") for label in shown)
    else:
        assert "No GPU readings" in text(at)


def test_engine_page_percentiles_come_from_the_calls_and_name_each_ttft(app: AppTest, seeded: SeededStack) -> None:
    """Queue time and TTFT percentiles from the calls' own engine spans (the simulated engine traces
    to the project), not interpolated in a histogram bucket; the page says which TTFT is which."""
    at = page(app, "views/engine.py")
    at.selectbox(key="aw_range").set_value("Last 15 minutes").run()
    assert not at.exception, [e.value for e in at.exception]
    end = math.ceil(time.time() / 5) * 5  # the page's window (ui.window), or the 5 s before it
    windows = [
        seeded.get("/api/engine/metrics", engine="sim-engine", start=e - 900, end=e)["calls"] for e in (end, end - 5)
    ]
    calls = windows[0]
    assert calls["queue_calls"] > 0 and calls["ttft_calls"] > 0 and calls["client_calls"] > 0, calls
    titles = {c.title.split(":")[0]: c.title for c in svg_charts(at)}
    for title, name in (("Queue time", "queue"), ("Time to first token (engine)", "ttft")):
        assert "from the engine spans of " in titles[title] and "histogram" not in titles[title], titles[title]
        shown = titles[title].split("p50 ")[1].split(" ·")[0]
        assert shown in {ui.fmt(w[f"{name}_p50"], "s") for w in windows}, (titles[title], windows)
    note = text(at)
    assert "engine TTFT: queue + prefill, measured at the server" in note
    assert "client TTFT (the Overview's): the first streamed token the client saw" in note


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("views/overview.py", "No runs in the last hour"),
        ("views/runs.py", "No runs in the last hour"),
        ("views/cost.py", "No spend recorded"),
        ("views/engine.py", "No engine is scraped"),
        ("views/alerts.py", "No alert is firing"),
    ],
)
def test_an_empty_project_gets_empty_states_with_what_to_run(
    path: str, says: str, app: AppTest, seeded: SeededStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTWATCH_API_KEY", project_key(seeded.collector, seeded.data_dir, "dash-empty"))
    at = page(app, path)
    assert says in text(at) and ("agentwatch" in text(at) or path.endswith("alerts.py"))


def test_alerts_page_shows_alerts_with_evidence_and_rules(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/alerts.py")
    shown = metrics(at)
    firing = int(shown["Firing now"])
    assert firing + int(shown["Resolved, last hour"]) >= 1
    if firing:  # the runs rules' or the spend rule's
        assert shown["Threshold"] in {"0.50", ui.fmt(0.0, ui.unit_of("projected_month_cost_usd"))}
    assert sorted(at.table[-1].value.index) == ["dash-no-traffic", "dash-spend-seen", "dash-traffic-seen"]


@pytest.mark.parametrize("path", PAGES)
def test_unreachable_collector_is_a_message_not_a_trace(
    path: str, app: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTWATCH_COLLECTOR_URL", "http://127.0.0.1:9")
    at = page(app, path, trace_id="1" * 32)
    if path != "views/run_detail.py" or at.error:
        assert any("unreachable" in e.value for e in at.error)


def login(at: AppTest, secret: str) -> None:
    """Type into the login form and submit it (form values travel with the submit)."""
    at.text_input(key="aw_login_secret").input(secret)
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]


def test_password_login(seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in dashboard_env(seeded, AGENTWATCH_DASHBOARD_PASSWORD="s3cret").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AGENTWATCH_DASHBOARD_OPEN", raising=False)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not metrics(at) and at.text_input(key="aw_login_secret").label == "Dashboard password"
    login(at, "wrong")
    assert any("Wrong password" in e.value for e in at.error) and not metrics(at)
    login(at, "s3cret")
    assert metrics(at)["Runs"] == str(seeded.runs)
    assert ui.OPEN_MODE_BANNER not in [w.value for w in at.warning]


def test_key_login_checks_the_key_with_the_collector(seeded: SeededStack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTWATCH_COLLECTOR_URL", seeded.collector)
    for name in ("AGENTWATCH_DASHBOARD_OPEN", "AGENTWATCH_DASHBOARD_PASSWORD", "AGENTWATCH_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert at.text_input(key="aw_login_secret").label == "Project API key"
    login(at, "aw_not_a_key")
    assert any("rejected this API key" in e.value for e in at.error)
    login(at, seeded.key)
    assert metrics(at)["Runs"] == str(seeded.runs)


def test_runs_page_searches_and_finds_failed_tools(app: AppTest, seeded: SeededStack) -> None:
    runs = seeded.get("/api/runs", limit=50)["items"]
    at = page(app, "views/runs.py")
    at.text_input(key="runs_search").set_value(runs[0]["trace_id"][:10]).run()
    assert not at.exception and tables(at)["runs_table"].ids == [runs[0]["trace_id"]]
    at.text_input(key="runs_search").set_value("").run()
    at.toggle(key="runs_tool_failed").set_value(True).run()
    failed = {r["trace_id"] for r in runs if r["tool_failures"]}
    assert failed, "the seeded traffic has failed tool calls"
    assert not at.exception and set(tables(at)["runs_table"].ids) == failed
    at.text_input(key="runs_search").set_value("no-such-run").run()
    assert not at.exception and "runs_table" not in tables(at) and "No runs match" in text(at)
    # a search that misses says so, not that nothing is stored (the demo hint is for an empty project)
    assert f"without them there are {seeded.get('/api/runs', limit=1)['total']:,} runs" in text(at)
    assert "agentwatch demo" not in text(at)


def test_runs_page_filters_and_sorts_every_run_in_the_store(app: AppTest, seeded: SeededStack) -> None:
    runs = seeded.get("/api/runs", limit=50)["items"]
    at = page(app, "views/runs.py")
    more_filter(at, "runs_size", 5)
    at.selectbox(key="runs_sort").set_value("Tool failures").run()
    shown = [int(c) for c in tables(at)["runs_table"].column("tool_failures")]
    assert shown == sorted((r["tool_failures"] for r in runs), reverse=True)[:5]  # the top of every run, not of a page
    user = next(r["user_id"] for r in runs if r["user_id"])
    more_filter(at, "runs_user", user)
    assert set(tables(at)["runs_table"].ids) == {r["trace_id"] for r in runs if r["user_id"] == user}
    more_filter(at, "runs_user", user[:-1])  # exact: a part finds nothing
    assert not at.exception and "No runs match" in text(at)
    more_filter(at, "runs_user", "")
    at.text_input(key="runs_search").set_value(user.upper()).run()  # the search finds parts, any case
    assert {r["trace_id"] for r in runs if user.lower() in r["user_id"].lower()} >= set(tables(at)["runs_table"].ids)


def test_overview_offers_the_most_expensive_run(app: AppTest, seeded: SeededStack) -> None:
    at = page(app, "views/overview.py")
    top = seeded.get("/api/runs", sort="-cost_usd", limit=1)["items"][0]
    (line,) = [e.proto.body for e in at.get("html") if "aw-costliest" in e.proto.body]
    assert f"<b>Most expensive run:</b> {top['agent']} · {ui.fmt(top['cost_usd'], 'USD')}" in line
    assert f'<a href="run?run={top["trace_id"]}">open it' in line  # one click to its run
