"""Numbers on the dashboard (short enough for a card, precise where small, one blank marker), runs search, login sessions."""

from __future__ import annotations

import pytest

from agentwatch_platform.dashboard import ui


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (12_345.6, "USD", "$12.3k"),
        (1_234.5, "USD", "$1,234"),
        (123.4, "USD", "$123"),
        (12.345, "USD", "$12.35"),
        (0.5, "USD", "$0.50"),
        (0.0045, "USD", "$0.0045"),
        (0.00003, "USD", "$0.00003"),
        (3.35e-5, "USD", "$0.000034"),
        (0.0, "USD", "$0"),
        (6.9e-18, "USD", "$0"),
        (-6.9e-18, "USD", "$0"),
        (1e-8, "USD", "$0.00000001"),
        (2.5e6, "USD", "$2.5M"),
        (8.9, "/min", "8.9/min"),
        (0.573, "/min", "0.57/min"),
        (123.4, "/min", "123/min"),
        (0.00138, "s", "1.4 ms"),
        (0.311, "s", "311 ms"),
        (4.5, "s", "4.50 s"),
        (110, "s", "1 min 50 s"),
        (211, "s", "3 min 31 s"),
        (7200, "s", "2 h"),
        (7500, "s", "2 h 5 min"),
        (273_600, "s", "3 d 4 h"),
        (1234, "", "1,234"),
        (6.33, "", "6.33"),
        (1_234_567, "", "1.23M"),
        (1500, "tokens/s", "1.5k tok/s"),
        (45.67, "tokens/s", "45.7 tok/s"),
        (0.123, "ratio", "12.3 %"),
        (None, "USD", ui.BLANK),
        (float("nan"), "s", ui.BLANK),
        (float("inf"), "", ui.BLANK),
    ],
)
def test_fmt_is_short_and_keeps_small_values(value: float | None, unit: str, shown: str) -> None:
    assert ui.fmt(value, unit) == shown


def test_every_formatted_figure_fits_a_card() -> None:
    for unit in ("USD", "s", "", "/min"):
        for value in (0.000012345, 0.012345, 1.2345, 12.345, 123.45, 12_345.6, 1_234_567.8, 987_654_321.0):
            assert len(ui.fmt(value, unit)) <= (10 if unit == "s" else 9), (value, unit, ui.fmt(value, unit))
    assert all(len(ui.fmt(v, "ratio")) <= 7 for v in (0.0, 0.0012, 0.5, 1.0))


def test_delta_is_a_signed_percentage() -> None:
    assert ui.fmt_delta(0.1234) == "+12.3 %" and ui.fmt_delta(None) is None and ui.fmt_delta(float("nan")) is None


def test_login_sessions_expire_and_can_be_dropped() -> None:
    now = [1000.0]
    store = ui.SessionStore(clock=lambda: now[0])
    token = store.create(("aw_key",))
    assert store.get(token) == ("aw_key",) and store.get("") is None and store.get("forged") is None
    store.update(token, ("aw_other", "aw_key"))  # a project switch: the key in use first
    assert store.get(token) == ("aw_other", "aw_key")
    now[0] += ui.SESSION_TTL_S + 1
    assert store.get(token) is None
    store.update(token, ("aw_key",))  # an expired session is not revived
    assert store.get(token) is None
    fresh = store.create(("aw_key",))
    store.drop(fresh)
    assert store.get(fresh) is None


@pytest.mark.parametrize(
    ("count", "noun", "shown"),
    [
        (1, "call", "1 call"),
        (0, "call", "0 calls"),
        (2, "LLM call", "2 LLM calls"),
        (1234, "span", "1,234 spans"),
        (1_755_020, "token", "1,755,020 tokens"),
        (3, "child", "3 children"),
    ],
)
def test_a_count_has_its_noun_in_the_right_number(count: int, noun: str, shown: str) -> None:
    assert ui.plural(count, noun, "children" if noun == "child" else None) == shown


def test_counts_are_exact_with_separators_never_scientific() -> None:
    from agentwatch_platform.dashboard import formatting

    assert formatting.count(1_755_020) == "1,755,020" and formatting.count(None) == ui.BLANK
    for value in (1.0, 12.5, 1_755_020.0, 3.2e9, 4.4e-7):
        for unit in ("", "s", "USD", "ratio", "tokens/s", "/min"):
            assert "e+" not in ui.fmt(value, unit) and "e-" not in ui.fmt(value, unit), (value, unit)
