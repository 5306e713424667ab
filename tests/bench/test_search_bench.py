"""``bench.search`` at a tiny size: its days are written, indexed and searched, and the results file
says what each needle found and whether the whole range was read."""

from __future__ import annotations

import json
from pathlib import Path

from bench import search


def test_search_bench_finds_the_ticket_and_stops_at_the_limit_for_a_common_word(tmp_path: Path) -> None:
    out, store = tmp_path / "search", tmp_path / "store"
    args = ["--spans-per-day", "3000", "--days", "2", "--repeats", "1", "--out", str(out), "--store-dir", str(store)]
    assert search.main(args) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    needles = {(n["needle"], n["limit"]): n for n in result["search"]["needles"]}
    ticket = next(n for n in result["search"]["needles"] if n["needle"].startswith("TICKET-"))
    assert ticket["traces"] == 1 and ticket["complete"]  # one span names it, in one run
    assert needles[("zebra", 1_000)]["traces"] == 0 and needles[("zebra", 1_000)]["complete"]
    assert result["search"]["days"] == 2 and result["search"]["index_bytes"] > 0
    assert search.main(args) == 0  # a kept store is searched again, not written again
    assert json.loads(out.with_suffix(".json").read_text())["write_s"] == result["write_s"]
    assert "whole range searched" in out.with_suffix(".md").read_text()
