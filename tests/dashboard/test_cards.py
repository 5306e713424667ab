"""The overview's HTML metric cards (``dashboard.cards``): what ``st.metric`` showed, as one block."""

from __future__ import annotations

import base64
import re

from agentwatch_platform.dashboard import cards
from tests.dashboard.support import html_cards


def test_cards_show_label_value_delta_and_sparkline() -> None:
    body = cards.cards_html(
        [
            cards.Card("Cost", "$12.3k", "+4.5 %", rise_is_good=False, points=[1.0, 3.0, 2.0]),
            cards.Card("Runs / min", "8.9/min", "-3 % vs avg", help="Over the last complete bucket.", points=[2.0]),
            cards.Card("TTFT p50", "–"),
        ]
    )
    assert html_cards(body) == {"Cost": "$12.3k", "Runs / min": "8.9/min", "TTFT p50": "–"}
    assert 'title="Over the last complete bucket."' in body
    deltas = re.findall(rf'class="{cards.DELTA_CLASS}" style="color: (#\w+);[^>]*>(.) ([^<]+)<', body)
    assert deltas == [(cards.BAD, "↑", "+4.5 %"), (cards.BAD, "↓", "-3 % vs avg")]  # a rise in cost is bad
    images = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', body)
    assert len(images) == 1  # one point draws no line
    svg = base64.b64decode(images[0]).decode()
    assert svg.count("<polyline") == 1 and "0.00,29.00" in svg and "50.00,1.00" in svg


def test_a_fall_is_good_where_a_rise_is_bad_and_text_is_escaped() -> None:
    body = cards.cards_html([cards.Card("<b>x</b>", "1 & 2", "-1.0 %", rise_is_good=False)])
    assert "<b>x</b>" not in body and "&lt;b&gt;x&lt;/b&gt;" in body and "1 &amp; 2" in body
    assert f"color: {cards.GOOD}" in body


def test_no_change_reads_neither_good_nor_bad() -> None:
    body = cards.cards_html([cards.Card("Change (USD)", "$0", "+0.0 %", rise_is_good=False)])
    assert f"color: {cards.FLAT}" in body and "→ +0.0 %" in body and cards.BAD not in body


def test_a_flat_series_draws_a_line_not_a_division_by_zero() -> None:
    svg = base64.b64decode(cards.sparkline_uri([5.0, 5.0, 5.0]).split(",", 1)[1]).decode()
    assert "0.00,29.00 50.00,29.00 100.00,29.00" in svg
