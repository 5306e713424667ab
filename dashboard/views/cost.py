"""Cost: by model, agent and day; month to date and projected; top runs; levers; self-hosted cost."""

from __future__ import annotations

from typing import Any

import streamlit as st

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import CostBreakdown, CostRow, LeverSavings, WhatIf
from agentwatch_platform.dashboard import breakdowns, cards, run_table, svg_charts, tables, ui
from agentwatch_platform.dashboard.cards import Card


def render() -> None:
    st.title("Cost")
    win = ui.window()
    gpu_hour = _gpu_hour_price()
    with ui.guarded("the cost breakdown"):
        cost: CostBreakdown = ui.fetch(
            Api.cost, start=win.start, end=win.end, gpu_hour_usd=gpu_hour, **ui.agent_model()
        )
        if not cost.total_usd and not cost.top_runs and not cost.levers.llm_calls:
            ui.empty(f"No spend recorded in the {win.label.lower()}.")
            return
        _headlines(cost, win.label)
        _breakdowns(cost)
        breakdowns.cost(win)  # by user, model and step, each bar a link to its spans
        _levers(cost)
        _savings(cost.savings)
        _whatif(win)
        _self_hosted(cost)
        _top_runs(cost)


def _cards(shown: list[Card]) -> None:
    """Figures as HTML cards (``dashboard.cards``), four to a row, like the overview's."""
    st.html(cards.cards_html(shown, columns=4))


def _gpu_hour_price() -> float | None:
    """The sidebar's GPU-hour price (blank or 0: none)."""
    default = ui.config().gpu_hour_usd
    price = ui.typed_number(
        st.sidebar,
        "GPU-hour price (USD)",
        "cost_gpu_hour",
        what="price in USD",
        value=f"{default:g}" if default else "",
        placeholder="none",
        help="Self-hosted models have no list price: their cost is GPU time.",
    )
    return price or None


def _headlines(cost: CostBreakdown, label: str) -> None:
    _cards(
        [
            Card(f"Cost, {label.lower()} (USD)", ui.fmt(cost.total_usd, "USD")),
            Card("Month to date (USD)", ui.fmt(cost.month_to_date_usd, "USD")),
            Card(
                "Projected month (USD)",
                ui.fmt(cost.projected_month_usd, "USD"),
                help="Month-to-date spend extrapolated at its current daily rate.",
            ),
            Card(
                "Cost per successful task (USD)",
                ui.fmt(cost.cost_per_success_usd, "USD"),
                help="Total cost divided by runs whose outcome is success.",
            ),
        ]
    )


def _breakdowns(cost: CostBreakdown) -> None:
    drawn = [
        svg_charts.bar_chart(
            [r.key or "(none)" for r in rows], [r.cost_usd for r in rows], title, "USD", ui.fmt, width=440
        )
        for title, rows in (("By model", cost.by_model), ("By agent", cost.by_agent), ("By day (UTC)", cost.by_day))
    ]
    st.html(svg_charts.html_block(drawn, columns=3))
    if st.toggle("Cost tables (tokens and calls)", key="cost_tables"):
        cols = st.columns(3)
        for col, (name, rows) in zip(
            cols, (("model", cost.by_model), ("agent", cost.by_agent), ("day", cost.by_day)), strict=True
        ):
            with col:
                _cost_table(name, rows)


COST_TABLE_COLUMNS = [
    tables.Column("key", "key"),
    tables.Column("cost_usd", "cost (USD)", numeric=True),
    tables.Column("input_tokens", "input tokens", numeric=True),
    tables.Column("output_tokens", "output tokens", numeric=True),
    tables.Column("calls", "LLM calls", numeric=True),
]


def money(value: float) -> str:
    """A table's exact money: to the millionth of a dollar, as the API reports it."""
    return f"${value:,.6f}"


def _cost_table(name: str, rows: list[CostRow]) -> None:
    tables.table(
        [tables.Column("key", name), *COST_TABLE_COLUMNS[1:]],
        [
            tables.Row(
                str(i),
                [r.key or "(none)", money(r.cost_usd), f"{r.input_tokens:,}", f"{r.output_tokens:,}", f"{r.calls:,}"],
            )
            for i, r in enumerate(rows)
        ],
        key=f"cost_by_{name}",
        max_height=420,
    )


def _levers(cost: CostBreakdown) -> None:
    st.subheader("Cost levers (measured)")
    lv = cost.levers
    _cards(
        [
            Card(
                "Tool-cache hit rate",
                ui.fmt(lv.tool_cache_hit_rate, "ratio"),
                help=f"{ui.plural(lv.tool_cache_hits, 'hit')} of {ui.plural(lv.tool_calls, 'tool call')}",
            ),
            Card("Tokens saved by the cache", f"{lv.tokens_saved:,} tokens"),
            Card(
                "Calls routed to the small model",
                ui.fmt(lv.small_model_share, "ratio"),
                help=f"{lv.small_model_calls:,} of {ui.plural(lv.llm_calls, 'LLM call')}",
            ),
            Card("LLM calls", f"{lv.llm_calls:,}"),
        ]
    )
    if model := ui.agent_model()["model"]:
        st.caption(
            f"Filtered to {model}: these four count every call of the runs that used {model}, whichever model "
            "each call went to (one model's own calls would be routed 0 % or 100 %)."
        )


LEVER_LINES = {
    "cache": (
        "Caching",
        "a tool-cache hit skips the tool call; a prompt-cache hit bills cached input tokens at the "
        "cheaper cached rate (saved: those tokens at the full input price).",
    ),
    "routing": (
        "Routing",
        "easy steps go to a small model (saved: the same tokens priced on the model they would have used).",
    ),
    "degradation": (
        "Degradation",
        "under budget pressure or a saturated engine a run goes cheaper: small model, fewer "
        "steps or a bounded context (saved: its projected cost at the switch minus its final cost).",
    ),
    "rate_limit": (
        "Rate limiting",
        "token buckets per user and project queue or refuse requests (saved: each refused request at "
        "its user's mean served run cost, capped at its budget; queued runs cost the same, later).",
    ),
}


def _savings(savings: LeverSavings | None) -> None:
    """Each lever's measured saving against its counterfactual, and what degrading did to quality."""
    if savings is None:
        return
    st.subheader("Measured savings per lever")
    st.caption(
        f"Saved {ui.fmt(savings.total_saving_usd, 'USD')} in the range against each lever's counterfactual, "
        f"priced with the collector's price table (version {savings.price_version})."
    )
    for lever in savings.levers:
        title, line = LEVER_LINES[lever.lever]
        st.markdown(f"**{title}** — {line} Formula: {lever.basis}.")
    tables.table(
        [
            tables.Column("lever", "lever"),
            tables.Column("events", "events", numeric=True),
            tables.Column("actual", "spend (USD)", numeric=True),
            tables.Column("counterfactual", "counterfactual spend (USD)", numeric=True),
            tables.Column("saving", "saved (USD)", numeric=True),
            tables.Column("details", "details"),
        ],
        [
            tables.Row(
                lv.lever,
                [
                    LEVER_LINES[lv.lever][0],
                    f"{lv.events:,}",
                    money(lv.actual_usd),
                    money(lv.counterfactual_usd),
                    money(lv.saving_usd),
                    ", ".join(f"{ui.metric_label(k)} {_detail_value(k, v)}" for k, v in lv.detail.items()),
                ],
                marks={"saving": "good"} if lv.saving_usd > 0 else {},
            )
            for lv in savings.levers
        ],
        key="cost_savings",
    )
    st.caption("Quality beside the saving: runs a degradation acted in, and the others (refused runs in neither).")
    quality = [q.model_dump() for q in savings.quality]
    names = list(quality[0]) if quality else []
    tables.table(
        [tables.Column(n, ui.metric_label(n), numeric=n not in ("group",)) for n in names],
        [tables.Row(str(i), [_quality_cell(n, q[n]) for n in names]) for i, q in enumerate(quality)],
        key="cost_quality",
    )


def _detail_value(name: str, value: float) -> str:
    """A lever's detail figure in its unit: seconds, dollars, else a count ("1,755,020", not "1.75502e+06")."""
    if name.endswith("_s"):
        return ui.fmt(value, "s")
    if name.endswith("_usd"):
        return money(value)
    if name.endswith(("_rate", "_share")):
        return ui.fmt(value, "ratio")
    return f"{value:,.0f}" if float(value).is_integer() else ui.fmt(value, "")


def _quality_cell(name: str, value: object) -> str:
    if value is None:
        return ui.BLANK
    if name == "success_rate" and isinstance(value, float):
        return ui.fmt(value, "ratio")
    if name == "mean_cost_usd" and isinstance(value, float):
        return money(value)
    if isinstance(value, float):
        return ui.fmt(value, "")
    return f"{value:,}" if isinstance(value, int) else str(value)


WHATIF_POLICIES = {
    "route": "Route a step kind to another model",
    "cap_steps": "Cap steps per run",
    "evolving_report": "Evolving report instead of the whole history",
}


def _whatif(win: ui.Window) -> None:
    """A policy applied to the range's stored runs: its estimated cost change, before anything
    changes. Computed only while its expander is open: its widgets and query on every load of
    the page cost ~0.1 s in headless Chromium (bench.dashboard_ab)."""
    ui.keep_state(WHATIF_DEFAULTS)  # reopened, the expander shows what was set
    section = st.expander("What if: a policy's estimated cost on these runs", key="whatif_open", on_change="rerun")
    if section.open:
        with section:
            _whatif_estimate(win)


WHATIF_DEFAULTS = {
    "whatif_policy": next(iter(WHATIF_POLICIES)),
    "whatif_step": "research",
    "whatif_model": "sim-small",
    "whatif_cap": 6,
    "whatif_bound": 100,
}


def _whatif_estimate(win: ui.Window) -> None:
    cols = st.columns(3)
    policy = cols[0].selectbox(
        "Policy", list(WHATIF_POLICIES), format_func=WHATIF_POLICIES.__getitem__, key="whatif_policy"
    )
    options: dict[str, Any] = {}
    if policy == "route":
        options["step"] = cols[1].text_input("Step kind (step name)", key="whatif_step")
        options["model"] = cols[2].text_input("To model", key="whatif_model")
    elif policy == "cap_steps":
        options["cap"] = int(cols[1].number_input("Steps of work per run", min_value=1, key="whatif_cap"))
    else:
        options["bound"] = int(cols[1].number_input("Report tokens per call", min_value=1, key="whatif_bound"))
    with ui.guarded("the what-if estimate"):
        w: WhatIf = ui.fetch(
            Api.whatif, policy=policy, start=win.start, end=win.end, agent=ui.agent_model()["agent"], **options
        )
        _cards(
            [
                Card(
                    "Cost as it was (USD)", ui.fmt(w.actual_usd, "USD"), help=f"{ui.plural(w.runs, 'run')} in the range"
                ),
                Card("Estimated cost (USD)", ui.fmt(w.estimate_usd, "USD")),
                Card("Change (USD)", ui.fmt(w.change_usd, "USD"), ui.fmt_delta(w.change_ratio), rise_is_good=False),
                Card(
                    "95 % interval (± USD)",
                    ui.fmt(w.uncertainty_usd, "USD"),
                    help="From the spread of the per-run changes; it does not cover what the policy changes beyond tokens.",
                ),
            ]
        )
        st.caption(
            f"{w.description}: {w.runs_changed:,} of {ui.plural(w.runs, 'run')} and {ui.plural(w.calls_changed, 'LLM call')} change; "
            f"tokens {w.actual_tokens:,} -> {w.estimate_tokens:,}. Estimated as {w.basis}."
        )


def _self_hosted(cost: CostBreakdown) -> None:
    sh = cost.self_hosted
    if sh is None:
        st.caption(
            "Self-hosted cost: set a GPU-hour price in the sidebar (or `AGENTWATCH_GPU_HOUR_USD`) to price GPU time per 1k tokens."
        )
        return
    st.subheader("Self-hosted cost")
    _cards(
        [
            Card("GPU-hour price (USD)", ui.fmt(sh.gpu_hour_usd, "USD")),
            Card("GPU time (s)", f"{sh.gpu_seconds:,.0f} s"),
            Card("Tokens served", f"{sh.tokens_served:,}"),
            Card("Cost per 1k tokens (USD)", ui.fmt(sh.cost_per_1k_tokens_usd, "USD")),
        ]
    )
    if sh.by_load:
        by_load = sorted(sh.by_load, key=lambda row: row["running_requests"])
        chart = svg_charts.bar_chart(
            [f"{row['running_requests']:g}" for row in by_load],
            [row["cost_per_1k_tokens_usd"] for row in by_load],
            "Cost per 1k tokens by running requests (batching lowers it)",
            "USD",
            ui.fmt,
            width=1100,
        )
        st.html(svg_charts.html_block([chart]))


def _top_runs(cost: CostBreakdown) -> None:
    st.subheader("Most expensive runs")
    if not cost.top_runs:
        st.info("No runs in range.")
        return
    st.caption("Click a run to open it: its steps, spans and errors show why it cost what it did.")
    run_table.runs_table(
        cost.top_runs,
        key="cost_top_runs",
        columns=[
            "cost",
            "agent",
            "status",
            "steps",
            "tool_failures",
            "tokens",
            "duration",
            "models",
            "time",
            "trace_id",
        ],
    )


render()
