"""Charts drawn as inline SVG in one ``st.html`` block each: lines or stacked bars over time (with
gaps, an incident band and level lines) and bars over categories.

Why not Vega-Lite: in headless Chromium on the 2-core machine a page's first Vega-Lite chart cost
about 340 ms to idle (the library's bundle, compiled on every page load) and each further one about
170 ms; the same four overview charts as SVG cost about 900 ms less per load under the same load
(bench/results/dashboard_render.md). SVG costs its bytes, drawn by the browser with the page.
Hover: each time bucket (or bar) is a band with a ``<title>``, the browser's tooltip, naming its
time and every series' value in the units the metric cards use (``ui.fmt``). Run detail's charts
stay Vega-Lite (``dashboard.run_charts``): a click on them selects a span.

Times are UTC (the axis says so). Conventions as before: one colour per series, y kept in the
metric's domain (ratios 0-100 %, never below zero unless a value is), a line breaks where values
are missing.
"""

from __future__ import annotations

import base64
import html
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from agentwatch_api.labels import metric_label
from agentwatch_api.schemas import TimeSeries

CHART_CLASS, BAND_CLASS = "aw-chart", "aw-hover"
PALETTE = ("#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d")
ERROR_COLOUR, LEVEL_COLOUR = "#d62728", "#7f7f7f"
PARTIAL_COLOUR = "#6c757d"  # a bucket still filling (the collector's watermark)
WIDTH, HEIGHT = 640, 300  # the drawing's units; it is scaled to its column's width
RIGHT, TOP, AXIS_BELOW = 14, 10, 26
CHAR_W = 7.0  # a 12-unit sans-serif character, about
MARKERS_UP_TO = 90  # points drawn as dots on a line up to this many a series

_STYLE = f"""<style>
.aw-charts {{display: grid; grid-template-columns: repeat(var(--aw-columns), minmax(0, 1fr)); gap: 1rem 2rem;}}
.{CHART_CLASS} {{min-width: 0;}}
.{CHART_CLASS} .aw-title {{font-weight: 600; font-size: 0.95rem; margin-bottom: 0.2rem;}}
.{CHART_CLASS} .aw-plot {{position: relative;}}
.{CHART_CLASS} .aw-plot img {{width: 100%; height: auto; display: block;}}
.{CHART_CLASS} .{BAND_CLASS} {{position: absolute;}}
.{CHART_CLASS} .{BAND_CLASS}:hover {{background: rgba(127, 127, 127, 0.18);}}
.{CHART_CLASS} .{BAND_CLASS}:hover::after {{content: attr(data-tip); position: absolute; z-index: 5; top: 0.5rem;
  left: 100%; margin-left: 0.4rem; white-space: pre; font-size: 0.78rem; line-height: 1.35; padding: 0.3rem 0.5rem;
  background: rgba(250, 250, 250, 0.97); color: #262730; border: 1px solid rgba(49, 51, 63, 0.25); border-radius: 0.3rem;
  pointer-events: none;}}
.{CHART_CLASS} .{BAND_CLASS}.aw-flip:hover::after {{left: auto; right: 100%; margin: 0 0.4rem 0 0;}}
.{CHART_CLASS} .aw-legend {{display: flex; flex-wrap: wrap; gap: 0.2rem 0.9rem; font-size: 0.8rem; opacity: 0.85;}}
.{CHART_CLASS} .aw-legend i {{display: inline-block; width: 0.7rem; height: 0.7rem; margin-right: 0.3rem;
  border-radius: 2px; vertical-align: -1px;}}
.{CHART_CLASS} .aw-empty {{font-size: 0.85rem; opacity: 0.7; padding: 2rem 0;}}
</style>"""


@dataclass(frozen=True)
class Line:
    """One series: ``(time, value)`` in time order; a ``None`` value breaks the line there."""

    name: str
    points: Sequence[tuple[float, float | None]]


Formatter = Callable[[float | None, str], str]


@dataclass(frozen=True)
class _Box:
    """Where a chart draws: its plot area inside the drawing, from ``left`` to ``right`` and from
    ``top`` to ``bottom`` (the axes' labels outside it)."""

    width: float
    left: float
    bottom: float
    top: float = TOP

    @property
    def right(self) -> float:
        return self.width - RIGHT


def html_block(charts: Sequence[str], *, columns: int = 1) -> str:
    """Charts (``time_chart``, ``bar_chart``) as one block for ``st.html``, ``columns`` to a row:
    one element for the page, whatever the number of charts."""
    return f'{_STYLE}<div class="aw-charts" style="--aw-columns: {columns}">{"".join(charts)}</div>'


def time_chart(
    lines: Sequence[Line],
    title: str,
    unit: str,
    fmt: Formatter,
    *,
    stacked: bool = False,
    score: bool = False,
    band: tuple[float, float] | None = None,
    levels: Sequence[tuple[str, float]] = (),
    width: float = WIDTH,
    partial_from: float | None = None,
) -> str:
    """Lines (or bars stacked per time, ``stacked``) over time. ``score``: a value that may be
    negative (y follows the data, not from zero); ``band``: a time range shaded as an incident;
    ``levels``: named horizontal lines (a baseline, a threshold); ``width``: of the drawing, in
    units of which a label is 12 high (narrower for a narrower column keeps labels readable);
    ``partial_from``: the first bucket whose spans are still arriving (the collector's watermark),
    shaded and labelled so that a filling bucket never reads as a drop."""
    lines = [line for line in lines if any(v is not None for _, v in line.points)]
    times = sorted({t for line in lines for t, _ in line.points} | set(band or ()))
    if not lines or not times:
        return _frame(title, '<div class="aw-empty">No data in this range.</div>', [])
    values = [v for line in lines for _, v in line.points if v is not None]
    if stacked:
        totals: dict[float, float] = {}
        for line in lines:
            for t, v in line.points:
                totals[t] = totals.get(t, 0.0) + (v or 0.0)
        values = [*totals.values(), 0.0]
    lo, hi = _domain([*values, *(v for _, v in levels)], unit, score=score)
    ticks = _tick_labels(lo, hi, unit, fmt)
    box = _Box(width, _left_margin(ticks), HEIGHT - AXIS_BELOW)
    step = _step(times)
    t0, t1 = times[0] - (step / 2 if stacked else 0), times[-1] + (step / 2 if stacked else 0)
    if t1 <= t0:
        t0, t1 = t0 - 30, t1 + 30
    x = _scale(t0, t1, box.left, box.right)
    y = _scale(lo, hi, box.bottom, box.top)
    colours = {line.name: PALETTE[i % len(PALETTE)] for i, line in enumerate(lines)}
    parts = [_y_axis(ticks, y, box), _time_axis(t0, t1, x, box)]
    if band is not None:
        left, right = x(max(band[0], t0)), x(min(band[1], t1))
        parts.append(
            f'<rect x="{left:.1f}" y="{box.top}" width="{max(right - left, 1):.1f}" height="{box.bottom - box.top}" '
            f'fill="{ERROR_COLOUR}" fill-opacity="0.12"/>'
            f'<text x="{left + 4:.1f}" y="{box.top + 12}" fill="{ERROR_COLOUR}">incident</text>'
        )
    if partial_from is not None and partial_from <= times[-1]:
        left = x(max(partial_from - (step / 2 if stacked else 0), t0))
        parts.append(
            f'<rect x="{left:.1f}" y="{box.top}" width="{max(box.right - left, 1):.1f}" '
            f'height="{box.bottom - box.top}" fill="{PARTIAL_COLOUR}" fill-opacity="0.18"/>'
            f'<text x="{box.right - 4:.1f}" y="{box.top + 12}" fill="{PARTIAL_COLOUR}" text-anchor="end">'
            "partial: still arriving</text>"
        )
    if stacked:
        parts.append(_stacked_bars(lines, colours, x, y, step))
    else:
        parts += [_line(line, colours[line.name], x, y) for line in lines]
    for name, value in levels:
        ly = y(value)
        parts.append(
            f'<line x1="{box.left}" x2="{box.right}" y1="{ly:.1f}" y2="{ly:.1f}" stroke="{LEVEL_COLOUR}" '
            f'stroke-dasharray="4 4"/><text x="{box.left + 4}" y="{ly - 4:.1f}" fill="{LEVEL_COLOUR}">'
            f"{html.escape(name)} {html.escape(fmt(value, unit))}</text>"
        )
    legend = list(colours.items()) if len(lines) > 1 or stacked else []
    return _frame(title, _plot(parts, title, _hover_bands(lines, times, x, step, unit, fmt), box), legend)


def bar_chart(
    keys: Sequence[str], values: Sequence[float], title: str, unit: str, fmt: Formatter, *, width: float = WIDTH
) -> str:
    """Bars over categories (models, agents, days, histogram buckets), in their order, from zero
    up; ``width`` as ``time_chart``'s. Labels slant; where they would overlap, every k-th shows
    (each bar's hover text names it)."""
    if not keys:
        return _frame(title, '<div class="aw-empty">No data in this range.</div>', [])
    lo, hi = _domain([*values, 0.0], unit, score=False)
    ticks = _tick_labels(lo, hi, unit, fmt)
    longest = min(max(len(k) for k in keys), 22)
    box = _Box(width, _left_margin(ticks), HEIGHT - 12 - longest * CHAR_W * 0.5)
    y = _scale(lo, hi, box.bottom, box.top)
    slot = (box.right - box.left) / len(keys)
    every = max(1, math.ceil(20 / slot))  # a label per 20 units at most
    parts, bands = [_y_axis(ticks, y, box)], []
    for i, (key, value) in enumerate(zip(keys, values, strict=True)):
        left, top, cx = box.left + i * slot, y(max(value, 0.0)), box.left + (i + 0.5) * slot
        parts.append(
            f'<rect x="{left + slot * 0.15:.1f}" y="{top:.1f}" width="{slot * 0.7:.1f}" '
            f'height="{max(y(0.0) - top, 0.5):.1f}" fill="{PALETTE[0]}"/>'
        )
        if i % every == 0:
            label = html.escape(key if len(key) <= 22 else key[:21] + "…")
            parts.append(
                f'<text x="{cx + 4:.1f}" y="{box.bottom + 14:.1f}" text-anchor="end" fill="#555" '
                f'transform="rotate(-30 {cx + 4:.1f} {box.bottom + 14:.1f})">{label}</text>'
            )
        bands.append((left, left + slot, f"{key}\n{fmt(value, unit)}"))
    return _frame(title, _plot(parts, title, bands, box), [])


def from_series(series: Sequence[TimeSeries], *, stacked: bool = False) -> list[Line]:
    """API time series as lines: one per series, or per group when a stacked series is grouped
    (its empty buckets carry no group and are left out)."""
    lines: dict[str, list[tuple[float, float | None]]] = {}
    for ts in series:
        grouped = stacked and len({p.group for p in ts.points}) > 1
        for p in ts.points:
            if grouped and p.group == "":
                continue
            lines.setdefault(p.group or metric_label(ts.metric), []).append((p.t, p.value))
    return [Line(name, sorted(points)) for name, points in lines.items()]


def from_readings(series: Mapping[str, Mapping[float, float]]) -> list[Line]:
    """Readings ``{name: {t: value}}`` (engine gauges and counter rates) as lines that break where
    readings stopped (``segments``): an engine that was down is a gap, not a ramp across it."""
    lines = []
    for name, values in series.items():
        points: list[tuple[float, float | None]] = []
        for part in segments(values):
            if points:
                points.append(((points[-1][0] + part[0][0]) / 2, None))
            points += part
        lines.append(Line(name, points))
    return lines


def segments(values: Mapping[float, float], *, factor: float = 3.0) -> list[list[tuple[float, float | None]]]:
    """The readings ``{t: value}`` in time order, split where they stopped for longer than
    ``factor`` times the usual interval between them."""
    times = sorted(values)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    usual = statistics.median(gaps) if len(gaps) > 1 else 0.0
    parts: list[list[tuple[float, float | None]]] = []
    for prev, t in zip([None, *times], times, strict=False):
        if prev is None or (usual > 0 and t - prev > factor * usual):
            parts.append([])
        parts[-1].append((t, values[t]))
    return parts


# --- drawing ---------------------------------------------------------------------------------


def _frame(title: str, body: str, legend: list[tuple[str, str]]) -> str:
    keys = "".join(f'<span><i style="background:{c}"></i>{html.escape(n)}</span>' for n, c in legend)
    legend_html = f'<div class="aw-legend">{keys}</div>' if keys else ""
    return f'<div class="{CHART_CLASS}"><div class="aw-title">{html.escape(title)}</div>{body}{legend_html}</div>'


def _plot(parts: Sequence[str], title: str, bands: Sequence[tuple[float, float, str]], box: _Box) -> str:
    """The drawing as an SVG image (``st.html`` keeps no inline SVG) under a layer of hover bands:
    HTML boxes placed in percent of the drawing, so they follow it at any width, each showing its
    text on hover (and as the browser's tooltip)."""
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {box.width:g} {HEIGHT}" font-family="sans-serif" '
        f'font-size="12">{"".join(parts)}</svg>'
    )
    image = (
        f'<img alt="{html.escape(title)}" src="data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()}">'
    )
    top, height = box.top / HEIGHT * 100, (box.bottom - box.top) / HEIGHT * 100
    boxes = "".join(
        f'<div class="{BAND_CLASS}{" aw-flip" if left > box.width * 0.6 else ""}" data-tip="{html.escape(tip)}" '
        f'title="{html.escape(tip)}" style="left:{left / box.width * 100:.2f}%;width:{(right - left) / box.width * 100:.2f}%;'
        f'top:{top:.2f}%;height:{height:.2f}%"></div>'
        for left, right, tip in bands
    )
    return f'<div class="aw-plot">{image}{boxes}</div>'


def _line(line: Line, colour: str, x: Callable[[float], float], y: Callable[[float], float]) -> str:
    path, pen, dots = [], "M", []
    drawn = sum(v is not None for _, v in line.points)
    for t, v in line.points:
        if v is None:
            pen = "M"
            continue
        px, py = x(t), y(v)
        path.append(f"{pen}{px:.1f} {py:.1f}")
        pen = "L"
        if drawn <= MARKERS_UP_TO:
            dots.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.2"/>')
    return (
        f'<g class="aw-line" data-series="{html.escape(line.name)}" fill="{colour}">'
        f'<path d="{"".join(path)}" fill="none" stroke="{colour}" stroke-width="1.8"/>{"".join(dots)}</g>'
    )


def _stacked_bars(
    lines: Sequence[Line],
    colours: Mapping[str, str],
    x: Callable[[float], float],
    y: Callable[[float], float],
    step: float,
) -> str:
    base: dict[float, float] = {}
    bars = []
    width = max(abs(x(step) - x(0)) * 0.85, 1.0)
    for line in lines:
        for t, v in line.points:
            if not v:
                continue
            below = base.get(t, 0.0)
            base[t] = below + v
            top, bottom = y(below + v), y(below)
            bars.append(
                f'<rect x="{x(t) - width / 2:.1f}" y="{top:.1f}" width="{width:.1f}" height="{max(bottom - top, 0.3):.1f}" '
                f'fill="{colours[line.name]}"/>'
            )
    return f'<g class="aw-bars">{"".join(bars)}</g>'


def _hover_bands(
    lines: Sequence[Line], times: Sequence[float], x: Callable[[float], float], step: float, unit: str, fmt: Formatter
) -> list[tuple[float, float, str]]:
    """A band per time bucket (left, right, text) naming its time and every series' value there."""
    at: dict[float, list[str]] = {}
    for line in lines:
        for t, v in line.points:
            if v is not None:
                at.setdefault(t, []).append(f"{line.name}: {fmt(v, unit)}")
    half = max(abs(x(step) - x(0)) / 2, 1.0)
    return [(x(t) - half, x(t) + half, "\n".join([_when(t), *at[t]])) for t in times if t in at]


def _y_axis(ticks: Sequence[tuple[float, str]], y: Callable[[float], float], box: _Box) -> str:
    parts = [
        f'<line x1="{box.left}" x2="{box.left}" y1="{box.top}" y2="{box.bottom}" stroke="#31333f" stroke-opacity="0.35"/>'
    ]
    for tick, label in ticks:
        ty = y(tick)
        parts.append(
            f'<line stroke="#31333f" stroke-opacity="0.12" x1="{box.left}" x2="{box.right}" y1="{ty:.1f}" y2="{ty:.1f}"/>'
            f'<text x="{box.left - 6}" y="{ty + 4:.1f}" text-anchor="end">{html.escape(label)}</text>'
        )
    return f'<g fill="#555">{"".join(parts)}</g>'


def _time_axis(t0: float, t1: float, x: Callable[[float], float], box: _Box) -> str:
    room = max(2, int((box.right - box.left) / 90))  # a label per 90 units at most
    every = next((s for s in _TIME_STEPS if (t1 - t0) / s <= room), _TIME_STEPS[-1])
    daily = every >= 86_400
    parts = [
        f'<line x1="{box.left}" x2="{box.right}" y1="{box.bottom}" y2="{box.bottom}" stroke="#31333f" stroke-opacity="0.35"/>'
    ]
    t = math.ceil(t0 / every) * every
    zone_left = box.right - CHAR_W * len("UTC") - CHAR_W  # "UTC" and a space at the axis' end
    while t <= t1:
        label = datetime.fromtimestamp(t, tz=UTC).strftime("%m-%d" if daily else "%H:%M:%S" if every < 60 else "%H:%M")
        if x(t) + CHAR_W * len(label) / 2 > zone_left:  # a 30-day axis ran "12-03" into "UTC"
            break
        parts.append(f'<text x="{x(t):.1f}" y="{HEIGHT - 8}" text-anchor="middle">{label}</text>')
        t += every
    parts.append(f'<text x="{box.right}" y="{HEIGHT - 8}" text-anchor="end" opacity="0.6">UTC</text>')
    return f'<g fill="#555">{"".join(parts)}</g>'


def _tick_labels(lo: float, hi: float, unit: str, fmt: Formatter) -> list[tuple[float, str]]:
    """Round values across the range with their labels in the cards' units, or, where those read
    alike ("0.1 %" twice), with as many decimals as the step needs."""
    ticks = _ticks(lo, hi)
    labels = ["0" if t == 0 else fmt(t, unit) for t in ticks]
    if len(set(labels)) < len(labels):
        step = ticks[1] - ticks[0]
        scale, suffix = (100.0, " %") if unit == "ratio" else (1.0, "" if unit in ("", "1", "count") else f" {unit}")
        decimals = max(0, -math.floor(math.log10(step * scale)))
        labels = ["0" if t == 0 else f"{t * scale:,.{decimals}f}{suffix}" for t in ticks]
    return list(zip(ticks, labels, strict=True))


def _left_margin(ticks: Sequence[tuple[float, str]]) -> float:
    return 14 + CHAR_W * max((len(label) for _, label in ticks), default=1)


_TIME_STEPS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400, 7 * 86_400)


def _domain(values: Sequence[float], unit: str, *, score: bool) -> tuple[float, float]:
    """Never below zero for costs, times, counts and rates; ratios within 0-105 %; a score (which
    may be negative) as the data go; never an empty range."""
    finite = [v for v in values if math.isfinite(v)]
    lo, hi = min(finite, default=0.0), max(finite, default=1.0)
    if unit == "ratio" and lo >= 0:
        return 0.0, 1.05 if hi > 0.5 or hi <= 0 else hi * 1.2
    if not score and lo >= 0:
        lo = 0.0
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    pad = (hi - lo) * 0.05
    return (lo if lo == 0 else lo - pad), hi + pad


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round numbers (1, 2 or 5 times a power of ten) across the range."""
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step) + 1)]


def _step(times: Sequence[float]) -> float:
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    return min(gaps) if gaps else 60.0


def _scale(d0: float, d1: float, r0: float, r1: float) -> Callable[[float], float]:
    span = (d1 - d0) or 1.0
    return lambda v: r0 + (v - d0) / span * (r1 - r0)


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
