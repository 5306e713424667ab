"""Metric cards with sparklines, drawn as one HTML block (``st.html``) instead of one
``st.metric(chart_data=...)`` each.

Each ``st.metric`` sparkline is a Vega-Lite chart of its own in the browser (compile, render):
the overview's 18 cards took about 2 s to draw in headless Chromium on the 2-core machine, where
the same cards as HTML with inline SVG sparklines cost nothing measurable over a page with a
title only (bench/results/dashboard_render.md). The cards read like ``st.metric``'s: label (its
help on hover over a "?"), value never cut off, delta with an arrow coloured by whether the change is
good, and the series as a filled line. Browser tests find them by their class names
(``CARD_CLASS`` ...), as ``st.metric``'s by its test ids.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

CARD_CLASS, LABEL_CLASS, VALUE_CLASS, DELTA_CLASS = "aw-card", "aw-card-label", "aw-card-value", "aw-card-delta"
GOOD, BAD, FLAT, LINE = "#09ab3b", "#ff2b2b", "#808495", "#29b5e8"

_STYLE = f"""<style>
.aw-cards {{display: grid; grid-template-columns: repeat(var(--aw-columns), minmax(0, 1fr)); gap: 1rem;}}
.{CARD_CLASS} {{border: 1px solid rgba(49, 51, 63, 0.2); border-radius: 0.5rem; padding: calc(1rem - 1px);
  min-width: 0; display: flex; flex-direction: column;}}
.aw-card-head {{display: flex; align-items: center; gap: 0.3rem; min-width: 0;}}
.{LABEL_CLASS} {{font-size: 0.875rem; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;}}
.aw-card-help {{flex: none; width: 1rem; height: 1rem; border: 1px solid currentColor; border-radius: 50%;
  font-size: 0.7rem; line-height: 0.9rem; text-align: center; opacity: 0.6; cursor: help;}}
.{VALUE_CLASS} {{font-size: 2.25rem; line-height: 1.3; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;}}
.{DELTA_CLASS} {{font-size: 1rem; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  width: fit-content; max-width: 100%; border-radius: 0.5rem; padding: 0 0.4rem;}}
.aw-card img {{width: 100%; height: 3rem; margin-top: 0.5rem; display: block;}}
.aw-card-link {{margin-top: 0.4rem; font-size: 0.875rem;}}
.aw-card-counts {{font-size: 0.75rem; opacity: 0.7; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;}}
</style>"""


@dataclass(frozen=True)
class Card:
    """One figure: ``delta`` is a signed text ("+4.5 %", "-3 % vs avg"), coloured good when it
    rises and ``rise_is_good``; ``points`` draw the sparkline (none: no sparkline)."""

    label: str
    value: str
    delta: str | None = None
    rise_is_good: bool = True
    help: str | None = None
    points: Sequence[float] = ()
    link: tuple[str, str] | None = None  # (text, href): where the figure's rows are listed
    counts: str = ""  # what the figure counts, in a few words under its label ("over finished runs")


def cards_html(cards: Sequence[Card], *, columns: int = 6) -> str:
    """The cards as one block, ``columns`` to a row."""
    body = "".join(_card(card) for card in cards)
    return f'{_STYLE}<div class="aw-cards" style="--aw-columns: {columns}">{body}</div>'


def _card(card: Card) -> str:
    help_ = f'<span class="aw-card-help" title="{html.escape(card.help)}">?</span>' if card.help else ""
    parts = [
        f'<div class="aw-card-head"><div class="{LABEL_CLASS}">{html.escape(card.label)}</div>{help_}</div>',
        f'<div class="{VALUE_CLASS}">{html.escape(card.value)}</div>',
    ]
    if card.counts:
        parts.insert(1, f'<div class="aw-card-counts">{html.escape(card.counts)}</div>')
    if card.delta:
        falling = card.delta.lstrip().startswith("-")
        good = falling != card.rise_is_good
        colour, arrow = (GOOD if good else BAD), ("↓" if falling else "↑")
        if not any(c in "123456789" for c in card.delta.split()[0]):  # "+0.0 %": no change, neither good nor bad
            colour, arrow = FLAT, "→"
        parts.append(
            f'<div class="{DELTA_CLASS}" style="color: {colour}; background: {colour}1a">'
            f"{arrow} {html.escape(card.delta)}</div>"
        )
    if len(card.points) > 1:
        parts.append(f'<img alt="trend of {html.escape(card.label)}" src="{sparkline_uri(card.points)}">')
    if card.link:
        text, href = card.link
        parts.append(f'<div class="aw-card-link"><a href="{html.escape(href)}">{html.escape(text)} →</a></div>')
    return f'<div class="{CARD_CLASS}">{"".join(parts)}</div>'


def sparkline_uri(points: Sequence[float], *, width: int = 100, height: int = 30) -> str:
    """The series as a filled line in an SVG image (a data URI: ``st.html`` drops inline SVG)."""
    low, high = min(points), max(points)
    span = (high - low) or 1.0
    last = len(points) - 1
    xy = " ".join(
        f"{i * width / last:.2f},{height - 1 - (p - low) / span * (height - 2):.2f}" for i, p in enumerate(points)
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" preserveAspectRatio="none">'
        f'<polygon points="0,{height} {xy} {width},{height}" fill="{LINE}" fill-opacity="0.25"/>'
        f'<polyline points="{xy}" fill="none" stroke="{LINE}" stroke-width="1.5" vector-effect="non-scaling-stroke"/>'
        "</svg>"
    )
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
