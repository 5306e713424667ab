"""Numbers, durations and counts in words, formatted one way on every page: short enough for a
metric card ("$12.3k", "8.9/min"), precise where small (a cost of $0.00003 is not "$0.0000"),
thousands separated, never in scientific notation, durations as a person says them ("3 min 31 s"),
counts with their noun in the right number ("1 call", "2 calls").

Free of Streamlit (``ui`` re-exports these for the pages), so it is unit-tested directly. What a
metric is called and its unit come from ``agentwatch_api.labels``, shared with the alerts' notifications.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime


def fmt(value: float | None, unit: str) -> str:
    """A number with its unit, short enough for a metric card (never cut off: "$12.3k",
    "8.9/min") and precise where it is small (a cost of $0.00003 is not "$0.0000")."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return BLANK
    if unit == "USD":
        if abs(value) < MONEY_RESIDUE_USD:
            return "$0"
        return ("-" if value < 0 else "") + "$" + _money(abs(value))
    if unit == "s":
        return _duration(value)
    if unit == "ratio":
        return f"{value * 100:.1f} %"
    if unit in ("", "1", "count"):
        return _count(value)
    if unit == "tokens/s":
        return f"{_compact(value, 3)} tok/s"
    if unit.startswith("/"):
        return f"{_compact(value, 2)}{unit}"
    return f"{_compact(value, 3)} {unit}"


BLANK = "–"  # the one marker of "no value"
MONEY_RESIDUE_USD = 1e-9  # below one token at $0.01 per million: floating-point residue of a sum, shown as $0


def _money(v: float) -> str:
    if v >= 10_000:
        return _si(v)
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 1:
        return f"{v:.2f}"
    if v == 0:
        return "0"
    decimals = max(2, 1 - math.floor(math.log10(v)))  # two significant digits, at least cents
    text = f"{v:.{decimals}f}"
    return text.rstrip("0") if decimals > 2 and "." in text else text


def _duration(v: float) -> str:
    """Under 100 s with decimals; above, in whole units as a person says them: "3 min 31 s",
    "2 h 5 min", "3 d 4 h" (a 211 s incident read "4 min", rounded, as "3.5 min", decimal)."""
    if abs(v) < 0.01:
        return f"{v * 1000:.2g} ms"
    if abs(v) < 1:
        return f"{v * 1000:.0f} ms"
    if abs(v) < 100:
        return f"{v:.2f} s"
    sign, whole = ("-" if v < 0 else ""), round(abs(v))
    for big, big_unit, small, small_unit in ((86_400, "d", 3600, "h"), (3600, "h", 60, "min"), (60, "min", 1, "s")):
        if whole >= big:
            if whole >= 100 * big:
                return f"{sign}{_si(whole / big)} {big_unit}"
            first, rest = divmod(whole, big)
            return f"{sign}{first} {big_unit}" + (f" {rest // small} {small_unit}" if rest // small else "")
    return f"{sign}{whole} s"


def _count(v: float) -> str:
    if abs(v) >= 100_000:
        return _si(v)
    return f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 100 else f"{v:,.2f}"


def _compact(v: float, digits: int) -> str:
    """``digits`` significant digits below 1,000 (8.9, 0.57, 123), else thousands with k/M."""
    if abs(v) >= 1_000:
        return _si(v)
    if v == 0:
        return "0"
    if abs(v) < 0.01:
        return "<0.01" if v > 0 else ">-0.01"
    return f"{v:.{digits}g}" if abs(v) < 10**digits else f"{v:.0f}"


def _si(v: float) -> str:
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= size:
            scaled = v / size
            return f"{scaled:.3g}{suffix}" if abs(scaled) < 100 else f"{scaled:.0f}{suffix}"
    return f"{v:g}"


def fmt_delta(change: float | None) -> str | None:
    """A relative change for a metric card's delta (the page says what it compares with)."""
    return None if change is None or not math.isfinite(change) else f"{change * 100:+.1f} %"


def fmt_change(change: float | None) -> str | None:
    return None if change is None or math.isnan(change) else f"{change * 100:+.1f} % vs previous"


def fmt_time(t: float | None) -> str:
    return "–" if t is None else datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def plural(count: float, noun: str, nouns: str | None = None) -> str:
    """``1 call``, ``2 calls``, ``1,234 calls``: the count (thousands separated) and its noun in
    the right number; ``nouns`` where the plural is not the noun plus "s"."""
    word = noun if count == 1 else (nouns or noun + "s")
    return f"{_count(count) if abs(count) < 100_000 else f'{count:,.0f}'} {word}"


def count(value: float | None) -> str:
    """A whole count with thousands separators, exactly ("1,755,020", never "1.75502e+06")."""
    return BLANK if value is None or not math.isfinite(value) else f"{value:,.0f}"
