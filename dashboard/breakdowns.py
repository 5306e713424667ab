"""Breakdowns of spans across runs (the span explorer's groups) as bar lists whose every bar is a
link to the spans it counts: "which tool fails most" answered where people look (the Overview's
quality tab, the Cost page), one click from the failing calls themselves.

Drawn as plain HTML in one ``st.html`` block: each bar is an ``<a>`` to ``spans?...`` (so a
middle click opens a new tab), its label and value set as escaped text.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import streamlit as st

from agentwatch_api.client import CollectorClient as Api
from agentwatch_api.schemas import SpanGroup, SpanGroups
from agentwatch_platform.dashboard import ui
from agentwatch_platform.dashboard.formatting import plural

# group key -> (label shown, the /api/spans filter a group's value sets)
GROUP_BY: dict[str, tuple[str, str]] = {
    "tool": ("Tool", "tool"),
    "error_type": ("Error type", "error_type"),
    "model": ("Model", "model"),
    "kind": ("Span kind", "kind"),
    "step": ("Step", "step"),
    "name": ("Span name", "name"),
    "agent": ("Agent", "agent"),
    "version": ("Version", "version"),
    "user": ("User", "user_id"),
    "session": ("Session", "session_id"),
    "status": ("Status", "status"),
}
ATTRIBUTE = "attribute"
NONE = "(none)"

_CSS = """<style>
.aw-bars {display: grid; grid-template-columns: repeat(var(--aw-columns), minmax(0, 1fr)); gap: 1rem 2rem;}
.aw-bars .aw-title {font-weight: 600; font-size: 0.95rem; margin-bottom: 0.3rem;}
.aw-bars a.aw-bar-row {display: grid; grid-template-columns: minmax(6rem, 38%) 1fr auto; gap: 0.5rem; align-items: center;
  color: inherit; text-decoration: none; font-size: 0.85rem; padding: 0.12rem 0.2rem; border-radius: 0.25rem;}
.aw-bars a.aw-bar-row:hover {background: rgba(41, 181, 232, 0.1);}
.aw-bars a.aw-bar-row:hover .aw-bar-label {text-decoration: underline;}
.aw-bars .aw-bar-label {overflow: hidden; text-overflow: ellipsis; white-space: nowrap;}
.aw-bars .aw-bar-track {height: 0.8rem; background: rgba(49, 51, 63, 0.06); border-radius: 2px;}
.aw-bars .aw-bar-fill {height: 100%; background: #4c78a8; border-radius: 2px; min-width: 2px;}
.aw-bars .aw-bar-fill.aw-bad {background: #e45756;}
.aw-bars .aw-bar-value {font-variant-numeric: tabular-nums; white-space: nowrap; opacity: 0.85;}
.aw-bars .aw-empty {font-size: 0.85rem; opacity: 0.7; padding: 0.5rem 0;}
.aw-bars .aw-more {font-size: 0.8rem; margin-top: 0.3rem;}
</style>"""


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    text: str  # the value as shown
    href: str
    tip: str = ""


@dataclass(frozen=True)
class BarList:
    title: str
    bars: Sequence[Bar]
    bad: bool = False  # failures: drawn red
    more: tuple[str, str] | None = None  # (text, href) under the list
    empty: str = "Nothing in this range."


def short_error(error_type: str) -> str:
    """``pkg.module.ToolFailure (HTTP 503)`` -> ``ToolFailure (HTTP 503)``: the class name reads at a
    glance; the full name stays in the link and the hover text."""
    base, sep, rest = error_type.partition(" (")
    return base.rsplit(".", 1)[-1] + sep + rest


def spans_href(**filters: object) -> str:
    """The Spans page with these filters (and group-by) set, and the sidebar's range, agent and
    model as the address carries them (``ui.URL_FILTERS``); a filter given as None is left out."""
    range_ = ui.RANGE_SLUGS.get(st.session_state.get("aw_range", ""), "1h")
    sidebar = {
        "range": None if range_ == "1h" else range_,
        "agent": ui.chosen("aw_agent"),
        "model": ui.chosen("aw_model"),
    }
    query = {k: ("true" if v is True else v) for k, v in (sidebar | filters).items() if v not in (None, "", False)}
    return "spans" + (f"?{urlencode(query, doseq=True)}" if query else "")


def group_filter(by: str, key: str) -> dict[str, str]:
    """The filter that selects one group's spans: ``tool=fetch``, ``attribute=service.version=1.1``."""
    if by.startswith(f"{ATTRIBUTE}:"):
        return {ATTRIBUTE: f"{by.split(':', 1)[1]}={key}"}
    return {GROUP_BY[by][1]: key}


def bars(
    groups: Sequence[SpanGroup],
    by: str,
    value: Callable[[SpanGroup], float],
    text: Callable[[SpanGroup], str],
    *,
    filters: Mapping[str, object] | None = None,
    tip: Callable[[SpanGroup], str] | None = None,
) -> list[Bar]:
    """One bar per group, each linking to the group's spans under ``filters`` as well."""
    base = dict(filters or {})
    return [
        Bar(
            (short_error(g.key) if by == "error_type" else g.key) or NONE,
            value(g),
            text(g),
            spans_href(**{**base, **group_filter(by, g.key)}),
            tip(g) if tip else g.key,
        )
        for g in groups
    ]


def html_block(lists: Sequence[BarList], *, columns: int = 2) -> str:
    return f'{_CSS}<div class="aw-bars" style="--aw-columns: {columns}">{"".join(map(_list, lists))}</div>'


def _list(bar_list: BarList) -> str:
    parts = [f'<div class="aw-bar-list"><div class="aw-title">{html.escape(bar_list.title)}</div>']
    top = max((b.value for b in bar_list.bars), default=0.0)
    if not bar_list.bars:
        parts.append(f'<div class="aw-empty">{html.escape(bar_list.empty)}</div>')
    fill = "aw-bar-fill aw-bad" if bar_list.bad else "aw-bar-fill"
    for bar in bar_list.bars:
        width = 100.0 * bar.value / top if top > 0 else 0.0
        parts.append(
            f'<a class="aw-bar-row" href="{html.escape(bar.href)}" title="{html.escape(bar.tip or bar.label)}">'
            f'<span class="aw-bar-label">{html.escape(bar.label)}</span>'
            f'<span class="aw-bar-track"><span class="{fill}" style="display:block;width:{width:.1f}%"></span></span>'
            f'<span class="aw-bar-value">{html.escape(bar.text)}</span></a>'
        )
    if bar_list.more:
        text, href = bar_list.more
        parts.append(f'<div class="aw-more"><a href="{html.escape(href)}">{html.escape(text)} →</a></div>')
    parts.append("</div>")
    return "".join(parts)


# --- where people look: the Overview's quality tab, the Cost page ---------------------------------
QUALITY_TAB = "Quality and failures"
TOP = 10


def _scope(win: ui.Window, *, model: bool) -> dict[str, Any]:
    """The range, the sidebar's agent and, with ``model``, its model (a tool call has none, so the
    failure breakdowns leave it out, and say so under their bars when one is chosen)."""
    scope: dict[str, Any] = {"start": win.start, "end": win.end, "agent": ui.chosen("aw_agent")}
    return scope | {"model": ui.chosen("aw_model")} if model else scope


def _not_by_model() -> None:
    if ui.chosen("aw_model"):
        st.caption("Not filtered by the sidebar's model: tool calls have none.")


def quality(win: ui.Window) -> None:
    """Failures by tool and by error type, on the Overview's quality tab; each bar lists its spans."""
    if st.session_state.get("overview_tab") != QUALITY_TAB:
        return
    scope = _scope(win, model=False)
    with ui.guarded("the failure breakdowns"):
        got = ui.fetch_together(
            tools=ui.call(Api.span_groups, **scope, by="tool", kind="tool", sort="-failures", limit=TOP),
            errors=ui.call(Api.span_groups, **scope, by="error_type", sort="-spans", limit=TOP),
        )
        tools: SpanGroups = got["tools"]
        errors: SpanGroups = got["errors"]
        link: dict[str, object] = {"model": None}  # the links leave the sidebar's model out too
        lists = [
            BarList(
                "Failed tool calls by tool",
                bars(
                    tools.groups,
                    "tool",
                    lambda g: g.failures,
                    lambda g: f"{g.failures:,} of {g.spans:,} ({ui.fmt(g.failure_rate, 'ratio')})",
                    filters=link | {"kind": "tool", "failed": True, "by": "error_type"},
                ),
                bad=True,
                more=("All tool calls by tool", spans_href(**link, kind="tool", by="tool")),
                empty="No tool calls in this range.",
            ),
            BarList(
                "Failures by error type",
                bars(
                    errors.groups,
                    "error_type",
                    lambda g: g.spans,
                    lambda g: f"{g.spans:,} in {plural(g.runs, 'run')}",
                    filters=link | {"by": "tool"},
                ),
                bad=True,
                more=("All failed spans", spans_href(**link, failed=True, by="error_type")),
                empty="No failed calls in this range.",
            ),
        ]
        st.html(html_block(lists))
        _not_by_model()


def cost(win: ui.Window) -> None:
    """Cost by user, by model and by step on the Cost page; each bar lists the spans it sums."""
    scope = _scope(win, model=True)
    keys = {
        "user": ("Cost by user", "All users"),
        "model": ("Cost by model", "All models"),
        "step": ("Cost by step", "All steps"),
    }
    with ui.guarded("the cost breakdowns"):
        got = ui.fetch_together(
            **{by: ui.call(Api.span_groups, **scope, by=by, sort="-cost_usd", limit=TOP) for by in keys}
        )
        link: dict[str, object] = {}
        then = {"user": "model", "model": "step", "step": "model"}  # what the spans page groups a bar's spans by
        lists = [
            BarList(
                title,
                bars(
                    [g for g in got[by].groups if g.cost_usd > 0],
                    by,
                    lambda g: g.cost_usd,
                    lambda g: f"{ui.fmt(g.cost_usd, 'USD')} · {plural(g.runs, 'run')}",
                    filters=link | {"by": then[by]},
                ),
                more=(every, spans_href(**link, by=by)),
                empty="No spend in this range.",
            )
            for by, (title, every) in keys.items()
        ]
        st.subheader("Where the cost goes")
        st.caption(
            "Every billed call of the range (the sidebar's agent and model), by its run's user, its model and the step it ran in. "
            "Click a bar for its calls on the Spans page."
        )
        st.html(html_block(lists, columns=3))
